import { InvalidArgumentError, type Command } from 'commander';
import { createArtifactStore } from '../../shared/artifacts/create-artifact-store';
import { ProblemCollector } from '../../shared/errors';
import { readConfigFile } from '../../queues/runs/run-config';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { compareReports, formatComparison, readReplayReport } from '../../workers/replay/compare-reports';
import { replayStage } from '../../workers/replay/processor';
import type { ReplayOutput } from '../../workers/replay/replay-contract';
import type { SweepReport } from '../../workers/replay/replay-sweep';
import type { CliContext } from '../cli-context';
import { positiveInteger } from '../command-support';
import type { RegisterCommand } from './index';

interface CompareOptions {
  json?: boolean;
  seed: string;
  resamples: number;
  confidence: number;
  percentiles?: number[];
  metrics?: string[];
}

function confidenceLevel(value: string): number {
  const parsed = Number(value);
  if (!(parsed > 0 && parsed < 1)) throw new InvalidArgumentError('must be a number between 0 and 1, e.g. 0.95');
  return parsed;
}

function percentileList(value: string): number[] {
  const values = value.split(',').map((item) => Number(item.trim()));
  if (values.some((item) => !(item > 0 && item <= 100)))
    throw new InvalidArgumentError('must be comma-separated percentiles in (0, 100], e.g. 50,95,99');
  return values;
}

function ladderList(value: string): number[] {
  const values = value.split(',').map((item) => Number(item.trim()));
  if (values.some((item) => !(item > 0)))
    throw new InvalidArgumentError('must be comma-separated positive loads, e.g. 1,2,4,8,16');
  return values;
}

interface SweepOptions {
  config: string;
  in?: string[];
  out: string;
  ladder?: number[];
  sessionsPerStep?: number;
  runId: string;
  seed: string;
  json?: boolean;
}

function metricList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

/**
 * `hat replay compare <a.json> <b.json>`: A/B of two replay reports (e.g. MTP on vs off). Each
 * metric's percentiles side by side with B - A and a seeded bootstrap interval of it from the
 * raw samples both reports carry; differences whose interval contains 0 are run-to-run noise.
 */
export const registerReplayCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const replay = program.command('replay').description('full-agent session replay reports');
  replay
    .command('compare')
    .description('A/B two replay reports: percentile differences and whether they exceed run-to-run noise (bootstrap)')
    .argument('<a>', 'report.json of A (a path, or an s3:// / file:// URI)')
    .argument('<b>', 'report.json of B')
    .option('--json', 'print the comparison as JSON')
    .option('--seed <seed>', 'bootstrap seed (same seed, same intervals)', '0')
    .option('--resamples <n>', 'bootstrap resamples', positiveInteger, 1000)
    .option('--confidence <level>', 'two-sided confidence of the intervals', confidenceLevel, 0.95)
    .option('--percentiles <list>', 'percentiles to compare (default: those the reports list)', percentileList)
    .option('--metrics <list>', 'metrics to compare (default: all with samples in both)', metricList)
    .action(async (a: string, b: string, options: CompareOptions) => {
      const [reportA, reportB] = await Promise.all([
        readReplayReport(a, context.env),
        readReplayReport(b, context.env),
      ]);
      const comparison = compareReports(
        reportA,
        reportB,
        { a, b },
        {
          seed: options.seed,
          resamples: options.resamples,
          confidence: options.confidence,
          ...(options.percentiles ? { percentiles: options.percentiles } : {}),
          ...(options.metrics ? { metrics: options.metrics } : {}),
        },
      );
      if (options.json) {
        for (const warning of comparison.warnings) context.stderr.write(`warning: ${warning}\n`);
        context.printJson(comparison);
      } else context.stdout.write(formatComparison(comparison));
    });

  replay
    .command('sweep')
    .description(
      'capacity sweep: the replay at a ladder of loads until one breaks the SLO; highest load holding it, latency vs load, knee',
    )
    .requiredOption('--config <file>', 'replay stage config (YAML); its sweep: block, or --ladder')
    .option('--in <uri...>', "input URIs (set as the config's inputs)")
    .requiredOption(
      '--out <uri>',
      'where step-NN/ reports, sweep.json and sweep.html go: s3://bucket/prefix or file:///dir',
    )
    .option(
      '--ladder <list>',
      'loads to try, ascending: concurrencies (closed loop) or sessions/s (open loop); overrides sweep.ladder',
      ladderList,
    )
    .option('--sessions-per-step <n>', 'sessions each step replays (overrides sweep.sessionsPerStep)', positiveInteger)
    .option('--run-id <id>', 'run id recorded in manifests', 'local')
    .option('--seed <seed>', 'seed of the random choices', '0')
    .option('--json', 'print sweep.json on stdout')
    .action(async (options: SweepOptions) => {
      registerCatalogStages();
      const source = await readConfigFile(options.config, 'replay config');
      const value = { ...((source.value ?? {}) as Record<string, unknown>) };
      if (options.in && options.in.length > 0) value.inputs = options.in;
      const sweep = { ...((value.sweep ?? {}) as Record<string, unknown>) };
      if (options.ladder) sweep.ladder = options.ladder;
      if (options.sessionsPerStep !== undefined) sweep.sessionsPerStep = options.sessionsPerStep;
      value.sweep = sweep;
      const checked = replayStage.input.safeParse(value);
      if (!checked.success) {
        const problems = new ProblemCollector();
        problems.addAll(source.locator.zodProblems(checked.error));
        problems.throwIfAny(
          'STAGE_INPUT_INVALID',
          'the replay sweep config is invalid; fix the fields named below (a sweep needs sweep.ladder or --ladder)',
        );
      }
      const stores = createStoreCache(context.env, (rootUri) => createArtifactStore(rootUri, context.env));
      try {
        const result = await runStageLocally(replayStage, value, {
          store: stores.storeFor(options.out),
          openObject: stores.openObject,
          runId: options.runId,
          seed: options.seed,
          logger: context.logger,
        });
        const output = result.output as ReplayOutput;
        const { store, key } = stores.openObject(output.reportUri);
        const report = JSON.parse((await store.getBuffer(key)).toString('utf8')) as SweepReport;
        if (options.json) context.printJson(report);
        else context.stdout.write(formatSweep(report, output.htmlUri));
      } finally {
        await stores.close();
      }
    });
};

/** The sweep as text: one line per step, then the capacity and the knee. */
export function formatSweep(report: SweepReport, htmlUri: string): string {
  const unit = report.loadKind === 'closed' ? 'concurrent' : 'sessions/s';
  const lines = [`sweep of ${report.target}`];
  for (const step of report.steps) {
    const latency = Object.entries(step.latency)
      .map(([metric, values]) => `${metric} P50 ${values.p50?.toFixed(1) ?? '-'} P95 ${values.p95?.toFixed(1) ?? '-'}`)
      .join('; ');
    lines.push(`  step ${step.index}: ${step.load} ${unit}: SLO ${step.verdict}; ${latency}`);
  }
  lines.push(
    report.capacity
      ? `capacity: ${report.capacity.load} ${unit}${report.capacity.turnGoodputPerSecond !== null ? `, goodput ${report.capacity.turnGoodputPerSecond.toFixed(3)} turns/s` : ''}`
      : 'capacity: none (the first step broke the SLO)',
  );
  if (report.knee) lines.push(`knee: ${report.knee.load} ${unit} (${report.knee.metric} P50)`);
  lines.push(`${report.stoppedBecause}`, `chart: ${htmlUri}`);
  return `${lines.join('\n')}\n`;
}
