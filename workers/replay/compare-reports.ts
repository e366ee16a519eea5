import { readFile } from 'node:fs/promises';
import { zodProblems } from '../../shared/config/zod-problems';
import { openArtifactObject, type ArtifactStoreEnv } from '../../shared/artifacts/create-artifact-store';
import { BadInputError, ProblemCollector } from '../../shared/errors';
import { bootstrapPercentileDifference, type PercentileDifference } from '../../shared/metrics/bootstrap';
import { SampleSet } from '../../shared/metrics/sample-set';
import { Rng } from '../../shared/random/rng';
import { replayReportSchema, type ReplayReport } from './replay-report';

/** One side of an A/B comparison. */
export interface ComparedSide {
  source: string;
  runId: string;
  target: string;
  mode: string;
  load: string;
  verdict: string;
  specDecode: { acceptanceRate: number | null; acceptanceLength: number | null } | null;
}

export interface MetricComparison {
  metric: string;
  unit: string;
  scope: string;
  samplesA: number;
  samplesB: number;
  percentiles: PercentileDifference[];
}

export interface ReportComparison {
  a: ComparedSide;
  b: ComparedSide;
  confidence: number;
  resamples: number;
  seed: string;
  metrics: MetricComparison[];
  /** Metrics with at least one percentile difference beyond run-to-run noise. */
  significantMetrics: string[];
  /** How the two reports' serving differs (hardware, engine, version, served model, flags): compare with care. */
  warnings: string[];
}

export interface CompareOptions {
  /** Seed of the bootstrap. Default "0". */
  seed?: string;
  /** Default 1000. */
  resamples?: number;
  /** Default 0.95. */
  confidence?: number;
  /** Default: every percentile either report lists. */
  percentiles?: number[];
  /** Default: every metric with samples in both reports. */
  metrics?: string[];
}

/** Reads a report from a path or an artifact URI and checks its shape (BadInputError naming the file). */
export async function readReplayReport(location: string, env: ArtifactStoreEnv = {}): Promise<ReplayReport> {
  let text: string;
  try {
    if (/^(s3|file):\/\//.test(location)) {
      const { store, key } = openArtifactObject(location, env);
      try {
        text = (await store.getBuffer(key)).toString('utf8');
      } finally {
        await store.close();
      }
    } else {
      text = await readFile(location, 'utf8');
    }
  } catch (error) {
    if (error instanceof BadInputError) throw error;
    throw new BadInputError(
      'REPORT_NOT_FOUND',
      `cannot read ${location} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); pass a replay report.json`,
      { cause: error },
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new BadInputError(
      'BAD_REPORT',
      `${location} is not JSON (${(error as Error).message}); pass the report.json a replay wrote`,
    );
  }
  const parsed = replayReportSchema.safeParse(value);
  if (!parsed.success) {
    const problems = new ProblemCollector();
    problems.addAll(zodProblems(parsed.error, location).slice(0, 10));
    problems.throwIfAny('BAD_REPORT', `${location} is not a replay report`);
  }
  return parsed.data as unknown as ReplayReport;
}

/**
 * A/B of two replay reports (e.g. MTP on vs off): for every metric and percentile, B - A and a
 * seeded bootstrap confidence interval of that difference from the raw samples both reports
 * carry; a difference whose interval excludes 0 exceeds run-to-run noise.
 */
export function compareReports(
  a: ReplayReport,
  b: ReplayReport,
  sources: { a: string; b: string },
  options: CompareOptions = {},
): ReportComparison {
  const seed = options.seed ?? '0';
  const samplesA = SampleSet.fromJSON(a.samples, `${sources.a}: samples`);
  const samplesB = SampleSet.fromJSON(b.samples, `${sources.b}: samples`);
  const percentiles =
    options.percentiles ?? [...new Set([...a.percentiles, ...b.percentiles])].sort((left, right) => left - right);
  const names = options.metrics ?? Object.keys(a.metrics).filter((name) => name in b.metrics);
  const unknown = names.filter((name) => !(name in a.metrics) || !(name in b.metrics));
  if (unknown.length > 0) {
    throw new BadInputError(
      'UNKNOWN_METRIC',
      `--metrics names ${unknown.join(', ')}, which the reports do not both have; known: ${Object.keys(a.metrics).join(', ')}`,
    );
  }
  const rng = new Rng(seed);
  const metrics: MetricComparison[] = [];
  for (const name of names) {
    const valuesA = samplesA.get(name);
    const valuesB = samplesB.get(name);
    if (valuesA.length === 0 || valuesB.length === 0) continue;
    const metric = a.metrics[name];
    metrics.push({
      metric: name,
      unit: metric.unit,
      scope: metric.scope,
      samplesA: valuesA.length,
      samplesB: valuesB.length,
      percentiles: percentiles.map((p) =>
        bootstrapPercentileDifference(valuesA, valuesB, p, {
          rng: rng.fork(`${name}/${p}`),
          resamples: options.resamples,
          confidence: options.confidence,
        }),
      ),
    });
  }
  const side = (report: ReplayReport, source: string): ComparedSide => ({
    source,
    runId: report.runId,
    target: report.target.label,
    mode: report.mode,
    load:
      report.load.kind === 'closed'
        ? `closed, ${report.load.concurrency} concurrent`
        : `open, ${report.load.rate}/s, burstiness ${report.load.burstiness}`,
    verdict: report.slo.verdict,
    specDecode: report.specDecode.available
      ? {
          acceptanceRate: report.specDecode.acceptanceRate ?? null,
          acceptanceLength: report.specDecode.acceptanceLength ?? null,
        }
      : null,
  });
  return {
    a: side(a, sources.a),
    b: side(b, sources.b),
    confidence: options.confidence ?? 0.95,
    resamples: options.resamples ?? 1000,
    seed,
    metrics,
    significantMetrics: metrics
      .filter((metric) => metric.percentiles.some((difference) => difference.significant))
      .map((metric) => metric.metric),
    warnings: servingDifferences(a, b),
  };
}

/** Serving facts that differ between the reports (a fact one of them lacks counts as differing). */
export function servingDifferences(a: ReplayReport, b: ReplayReport): string[] {
  const facts = (report: ReplayReport): Record<string, string> => {
    const server = report.target.server;
    const flags = { ...(server?.settings ?? {}), ...(report.target.serving ?? {}) };
    return {
      hardware: report.target.hardware ?? '(not recorded)',
      engine: server?.engine ?? '(not recorded)',
      'engine version': server?.version ?? '(not recorded)',
      'served model':
        (server?.models ?? [])
          .map((model) => `${model.id}${model.maxModelLen !== undefined ? `/${model.maxModelLen}` : ''}`)
          .join(',') || '(not recorded)',
      ...Object.fromEntries(Object.entries(flags).map(([key, value]) => [`serving.${key}`, String(value)])),
    };
  };
  const left = facts(a);
  const right = facts(b);
  const keys = [...new Set([...Object.keys(left), ...Object.keys(right)])];
  return keys
    .filter((key) => (left[key] ?? '(not set)') !== (right[key] ?? '(not set)'))
    .map((key) => `${key} differs: A ${left[key] ?? '(not set)'}, B ${right[key] ?? '(not set)'}`);
}

/** The comparison as a text table. */
export function formatComparison(comparison: ReportComparison): string {
  const lines: string[] = [];
  const describe = (label: string, side: ComparedSide) => {
    const spec = side.specDecode
      ? `, acceptance rate ${formatNumber(side.specDecode.acceptanceRate)}, length ${formatNumber(side.specDecode.acceptanceLength)}`
      : '';
    lines.push(`${label}: ${side.target}`);
    lines.push(`   ${side.source} (run ${side.runId}, ${side.mode}, ${side.load}, SLO ${side.verdict}${spec})`);
  };
  describe('A', comparison.a);
  describe('B', comparison.b);
  for (const warning of comparison.warnings)
    lines.push(`WARNING: ${warning}; the reports measured different serving setups`);
  lines.push(
    `B - A per percentile; ${Math.round(comparison.confidence * 100)}% bootstrap intervals (${comparison.resamples} resamples, seed ${comparison.seed}); "noise" when the interval contains 0`,
  );
  const header = ['metric', 'pct', 'A', 'B', 'B - A', 'interval', 'change', 'verdict'];
  const rows: string[][] = [header];
  for (const metric of comparison.metrics) {
    for (const difference of metric.percentiles) {
      rows.push([
        metric.metric,
        `P${difference.percentile}`,
        formatNumber(difference.a),
        formatNumber(difference.b),
        formatSigned(difference.difference),
        `[${formatSigned(difference.low)}, ${formatSigned(difference.high)}]`,
        difference.relativeDifference === null ? '-' : `${formatSigned(difference.relativeDifference * 100, 1)}%`,
        difference.significant ? (difference.difference < 0 ? 'lower' : 'higher') : 'noise',
      ]);
    }
  }
  const widths = header.map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  for (const row of rows)
    lines.push(
      row
        .map((cell, column) =>
          column < 2 || column === 7 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]),
        )
        .join('  ')
        .trimEnd(),
    );
  lines.push(
    comparison.significantMetrics.length > 0
      ? `beyond noise: ${comparison.significantMetrics.join(', ')}`
      : 'no difference beyond run-to-run noise',
  );
  return `${lines.join('\n')}\n`;
}

function formatNumber(value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '-';
  return Math.abs(value) >= 100 ? value.toFixed(1) : value.toFixed(3);
}

function formatSigned(value: number, digits?: number): string {
  if (!Number.isFinite(value)) return '-';
  const text = digits !== undefined ? value.toFixed(digits) : formatNumber(value);
  return value > 0 ? `+${text}` : text;
}
