import { z } from 'zod';
import type { LoadProfile } from './load-profile';
import type { ReplayReport } from './replay-report';
import { escapeHtml } from '../../shared/report/html';

export const SWEEP_SCHEMA_VERSION = 1;

/**
 * A capacity sweep: the same replay at a ladder of loads (closed-loop concurrencies, or open-loop
 * rates when `load.kind` is open), each step an ordinary replay report under `step-NN/`, stopping
 * at the first step whose SLO verdict fails. Answers "how many concurrent live rooms does this
 * server hold within the SLO".
 */
export const sweepSchema = z
  .object({
    /** Loads to try, ascending: concurrencies (closed loop) or session arrivals per second (open loop). */
    ladder: z
      .array(z.number().positive())
      .min(1)
      .max(64)
      .refine((ladder) => ladder.every((value, index) => index === 0 || value > ladder[index - 1]), {
        message: 'ladder must be strictly ascending',
      }),
    /** Sessions each step replays (measured). Default: the config's `sessions`, else each recorded session once. */
    sessionsPerStep: z.number().int().min(1).max(1_000_000).optional(),
    /** Stop at the first step that breaks the SLO. Default true (false runs the whole ladder). */
    stopOnBreak: z.boolean().default(true),
  })
  .strict();
export type SweepConfig = z.infer<typeof sweepSchema>;

/** The load of one step: the base load with the ladder value as its concurrency or rate. */
export function stepLoad(base: LoadProfile, value: number): LoadProfile {
  if (base.kind === 'closed') return { kind: 'closed', concurrency: Math.max(1, Math.round(value)) };
  return { ...base, rate: value };
}

export interface SweepStep {
  index: number;
  /** The ladder value: concurrency or rate. */
  load: number;
  /** The step's report.json and report.html (ordinary replay reports, comparable with `hat replay compare`). */
  reportUri: string;
  htmlUri: string;
  verdict: 'pass' | 'fail' | 'no-data';
  objectives: ReplayReport['slo']['objectives'];
  /** Turns within the goodput thresholds per second (null without turn thresholds). */
  turnGoodputPerSecond: number | null;
  sessionsPerSecond: number;
  /** P50/P95 of each objective's metric at this step. */
  latency: Record<string, { p50: number | null; p95: number | null }>;
  callsFailed: number;
}

export interface SweepReport {
  schemaVersion: typeof SWEEP_SCHEMA_VERSION;
  kind: 'hat-replay-sweep';
  runId: string;
  createdAt: string;
  target: string;
  loadKind: 'closed' | 'open';
  ladder: number[];
  steps: SweepStep[];
  /** Why the sweep stopped. */
  stoppedBecause: string;
  /** The highest load whose step held the SLO (null when the first step broke it). */
  capacity: { load: number; turnGoodputPerSecond: number | null; sessionsPerSecond: number } | null;
  /**
   * The knee of the latency-vs-load curve of the first objective's metric: the step farthest below
   * the chord from the first to the last step (both axes scaled to [0, 1]); null under 3 steps.
   */
  knee: { load: number; metric: string } | null;
}

/** One step's figures from its report. */
export function sweepStepOf(
  index: number,
  load: number,
  report: ReplayReport,
  uris: { reportUri: string; htmlUri: string },
): SweepStep {
  const latency: SweepStep['latency'] = {};
  for (const objective of report.slo.objectives) {
    const summary = report.metrics[objective.metric]?.summary;
    latency[objective.metric] = { p50: summary?.percentiles.p50 ?? null, p95: summary?.percentiles.p95 ?? null };
  }
  return {
    index,
    load,
    ...uris,
    verdict: report.slo.verdict,
    objectives: report.slo.objectives,
    turnGoodputPerSecond: report.slo.goodput.turns?.perSecond ?? null,
    sessionsPerSecond: report.throughput.sessionsPerSecond,
    latency,
    callsFailed: report.counts.callsFailed,
  };
}

/** Capacity, knee and stop reason of the steps run. */
export function summarizeSweep(
  base: Omit<SweepReport, 'capacity' | 'knee' | 'stoppedBecause'>,
  stoppedEarly: boolean,
): SweepReport {
  const steps = base.steps;
  // The highest load held, provided every lower step held too: a pass above a failure is noise.
  let held: SweepStep | undefined;
  for (const step of steps) {
    if (step.verdict !== 'pass') break;
    held = step;
  }
  const broken = steps.find((step) => step.verdict !== 'pass');
  const stoppedBecause = broken
    ? `step ${broken.index} (load ${broken.load}) ${broken.verdict === 'fail' ? 'broke the SLO' : 'had no data for an objective'}${stoppedEarly ? '; the steps above it were not run' : ''}`
    : 'every step of the ladder held the SLO: capacity is at least the top of the ladder';
  const metric = steps[0]?.objectives[0]?.metric;
  return {
    ...base,
    stoppedBecause,
    capacity: held
      ? { load: held.load, turnGoodputPerSecond: held.turnGoodputPerSecond, sessionsPerSecond: held.sessionsPerSecond }
      : null,
    knee: metric ? kneeOf(steps, metric) : null,
  };
}

/** Kneedle on (load, P50 of the metric), increasing convex curve: the point farthest below the chord. */
function kneeOf(steps: readonly SweepStep[], metric: string): SweepReport['knee'] {
  const points = steps.flatMap((step) => {
    const value = step.latency[metric]?.p50;
    return value === null || value === undefined ? [] : [{ load: step.load, value }];
  });
  if (points.length < 3) return null;
  const first = points[0];
  const last = points[points.length - 1];
  const loadSpan = last.load - first.load || 1;
  const valueSpan = last.value - first.value;
  if (valueSpan <= 0) return null;
  let best: { load: number; gap: number } | undefined;
  for (const point of points.slice(1, -1)) {
    const x = (point.load - first.load) / loadSpan;
    const y = (point.value - first.value) / valueSpan;
    const gap = x - y;
    if (gap > 0 && (!best || gap > best.gap)) best = { load: point.load, gap };
  }
  return best ? { load: best.load, metric } : null;
}

/** The sweep as HTML: the table of steps and a latency-vs-load chart per objective metric (P50 and P95, the limits dashed). */
export function renderSweepHtml(sweep: SweepReport): string {
  const unit = sweep.loadKind === 'closed' ? 'concurrent sessions' : 'sessions/s';
  const metrics = [...new Set(sweep.steps.flatMap((step) => step.objectives.map((objective) => objective.metric)))];
  const charts = metrics.map((metric) => {
    const limits = sweep.steps[0]?.objectives.filter((objective) => objective.metric === metric) ?? [];
    return `<figure><figcaption><b>${escapeHtml(metric)}</b> vs load (${unit}): P50 solid, P95 dotted, SLO limits dashed</figcaption>${latencyChart(
      sweep,
      metric,
      limits.map((limit) => ({ label: `P${limit.percentile} ≤ ${limit.maxMs}`, value: limit.maxMs })),
    )}</figure>`;
  });
  const rows = sweep.steps
    .map((step) => {
      const cells = metrics
        .map((metric) => `<td>${fixed(step.latency[metric]?.p50)}</td><td>${fixed(step.latency[metric]?.p95)}</td>`)
        .join('');
      return `<tr><td>${step.index}</td><td>${step.load}</td><td class="${step.verdict === 'pass' ? 'pass' : 'fail'}">${step.verdict}</td>${cells}<td>${fixed(step.turnGoodputPerSecond, 3)}</td><td>${step.sessionsPerSecond.toFixed(3)}</td><td>${step.callsFailed}</td><td><a href="${escapeHtml(step.htmlUri)}">report</a></td></tr>`;
    })
    .join('');
  const capacity = sweep.capacity
    ? `Highest load holding the SLO: <b>${sweep.capacity.load} ${unit}</b>${sweep.capacity.turnGoodputPerSecond !== null ? `, goodput ${sweep.capacity.turnGoodputPerSecond.toFixed(3)} turns/s within the thresholds` : ''}.`
    : 'No step held the SLO.';
  const knee = sweep.knee ? ` Knee of ${escapeHtml(sweep.knee.metric)} (P50): ${sweep.knee.load} ${unit}.` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replay sweep ${escapeHtml(sweep.runId)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1200px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #d5d8e0;padding:3px 8px;text-align:right}th{background:#f1f3f7}.pass{color:#1e7b34;font-weight:700}.fail{color:#b3261e;font-weight:700}
svg{background:#fbfbfd;border:1px solid #e3e5ea}
</style></head><body>
<header><h1>Capacity sweep</h1><p><b>${escapeHtml(sweep.target)}</b></p><p>${capacity}${knee} ${escapeHtml(sweep.stoppedBecause)}.</p></header>
<section><h2>Steps</h2><table><tr><th>step</th><th>load (${unit})</th><th>SLO</th>${metrics.map((metric) => `<th>${escapeHtml(metric)} P50</th><th>P95</th>`).join('')}<th>turn goodput/s</th><th>sessions/s</th><th>failed calls</th><th></th></tr>${rows}</table></section>
<section><h2>Latency vs load</h2>${charts.join('\n')}</section>
</body></html>
`;
}

function fixed(value: number | null | undefined, digits = 1): string {
  return value === null || value === undefined ? '–' : value.toFixed(digits);
}

function latencyChart(sweep: SweepReport, metric: string, limits: Array<{ label: string; value: number }>): string {
  const width = 560;
  const height = 260;
  const margin = { left: 64, right: 110, top: 14, bottom: 36 };
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const points = sweep.steps.map((step) => ({
    load: step.load,
    p50: step.latency[metric]?.p50 ?? null,
    p95: step.latency[metric]?.p95 ?? null,
  }));
  const loads = points.map((point) => point.load);
  const values = [
    ...points.flatMap((point) => [point.p50, point.p95]).filter((value): value is number => value !== null),
    ...limits.map((limit) => limit.value),
  ];
  const xLow = Math.min(...loads);
  const xHigh = Math.max(...loads);
  const yHigh = Math.max(1, ...values) * 1.05;
  const x = (load: number) =>
    margin.left + (xHigh === xLow ? plotWidth / 2 : ((load - xLow) / (xHigh - xLow)) * plotWidth);
  const y = (value: number) => margin.top + plotHeight - (value / yHigh) * plotHeight;
  const line = (key: 'p50' | 'p95', dash: string) => {
    const drawn = points
      .filter((point) => point[key] !== null)
      .map((point) => `${x(point.load).toFixed(1)},${y(point[key] as number).toFixed(1)}`);
    return `<polyline fill="none" stroke="#4a6fa5" stroke-width="2"${dash} points="${drawn.join(' ')}"/>${points
      .filter((point) => point[key] !== null)
      .map(
        (point) =>
          `<circle cx="${x(point.load).toFixed(1)}" cy="${y(point[key] as number).toFixed(1)}" r="3" fill="#4a6fa5"><title>load ${point.load}: ${key.toUpperCase()} ${(point[key] as number).toFixed(1)} ms</title></circle>`,
      )
      .join('')}`;
  };
  const limitLines = limits
    .map(
      (limit) =>
        `<line x1="${margin.left}" x2="${margin.left + plotWidth}" y1="${y(limit.value).toFixed(1)}" y2="${y(limit.value).toFixed(1)}" stroke="#b3261e" stroke-dasharray="6 4"/><text x="${margin.left + plotWidth + 4}" y="${(y(limit.value) + 4).toFixed(1)}" font-size="10" fill="#b3261e">${escapeHtml(limit.label)}</text>`,
    )
    .join('');
  const ticks = [
    ...loads.map(
      (load) =>
        `<text x="${x(load).toFixed(1)}" y="${margin.top + plotHeight + 14}" text-anchor="middle" font-size="10">${load}</text>`,
    ),
    ...[0, 0.25, 0.5, 0.75, 1].map(
      (share) =>
        `<text x="${margin.left - 4}" y="${(y(share * yHigh) + 3).toFixed(1)}" text-anchor="end" font-size="10">${(share * yHigh).toFixed(0)}</text>`,
    ),
  ].join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="latency vs load"><line x1="${margin.left}" y1="${margin.top + plotHeight}" x2="${margin.left + plotWidth}" y2="${margin.top + plotHeight}" stroke="#333"/><line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + plotHeight}" stroke="#333"/>${limitLines}${line('p50', '')}${line('p95', ' stroke-dasharray="2 3"')}${ticks}<text x="${margin.left + plotWidth / 2}" y="${height - 4}" text-anchor="middle" font-size="11">load</text><text x="12" y="${margin.top + plotHeight / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 ${margin.top + plotHeight / 2})">ms</text></svg>`;
}
