import { InvalidArgumentError, type Command } from 'commander';
import { compareReports, formatComparison, readReplayReport } from '../../workers/replay/compare-reports';
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
  if (values.some((item) => !(item > 0 && item <= 100))) throw new InvalidArgumentError('must be comma-separated percentiles in (0, 100], e.g. 50,95,99');
  return values;
}

function metricList(value: string): string[] {
  return value.split(',').map((item) => item.trim()).filter(Boolean);
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
      const [reportA, reportB] = await Promise.all([readReplayReport(a, context.env), readReplayReport(b, context.env)]);
      const comparison = compareReports(reportA, reportB, { a, b }, {
        seed: options.seed,
        resamples: options.resamples,
        confidence: options.confidence,
        ...(options.percentiles ? { percentiles: options.percentiles } : {}),
        ...(options.metrics ? { metrics: options.metrics } : {}),
      });
      if (options.json) context.printJson(comparison);
      else context.stdout.write(formatComparison(comparison));
    });
};
