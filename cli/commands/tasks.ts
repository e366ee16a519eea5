import type { Command } from 'commander';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { CliContext } from '../cli-context';
import type { RegisterCommand } from './index';
import { openArtifactObject, readJsonlTextLines, writeJsonl, type JsonlWriteResult } from '../../shared/artifacts';
import { setLargestRecordBytes } from '../../shared/artifacts/record-limit';
import { BadInputError, formatProblem } from '../../shared/errors';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { importProductionLogs } from '../../shared/simulator/log-import';
import { expertReport, type RewardSummary } from '../../shared/simulator/policies/expert-report';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { taskCategories, taskSchema, type Task, type TaskCategory } from '../../shared/simulator/tasks/task-schema';
import { textStyles, type TextStyle } from '../../shared/simulator/world/text-style';

/**
 * `hat tasks generate | import | expert-report`: simulator task sets as gzip JSONL (local path
 * or artifact URI), production-log import with redaction, and the scripted expert's reward
 * distribution.
 */

/** A local path or an artifact URI, as a URI. */
export function toArtifactUri(target: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(target) ? target : pathToFileURL(resolve(target)).href;
}

function positiveInteger(flag: string, maximum = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < 1 || parsed > maximum)
      throw new BadInputError(
        'BAD_OPTION',
        `${flag} must be a whole number from 1 to ${maximum}, got ${JSON.stringify(value)}`,
      );
    return parsed;
  };
}

/** `price=2,chit_chat=0` -> weights; unknown categories are an error naming the known ones. */
function parseWeights(value: string): Partial<Record<TaskCategory, number>> {
  const weights: Partial<Record<TaskCategory, number>> = {};
  for (const pair of value.split(',').filter(Boolean)) {
    const [name, raw] = pair.split('=');
    const weight = Number(raw);
    if (!taskCategories.includes(name as TaskCategory) || raw === undefined || !Number.isFinite(weight) || weight < 0) {
      throw new BadInputError(
        'BAD_OPTION',
        `--weights entry ${JSON.stringify(pair)} must be category=weight with weight >= 0; categories: ${taskCategories.join(', ')}`,
      );
    }
    weights[name as TaskCategory] = weight;
  }
  return weights;
}

/** `--text`: one of the generator's text styles. */
function parseTextStyle(value: string): TextStyle {
  if (!(textStyles as readonly string[]).includes(value))
    throw new BadInputError(
      'BAD_OPTION',
      `--text must be one of ${textStyles.join(', ')}, got ${JSON.stringify(value)}`,
    );
  return value as TextStyle;
}

const textHelp = 'text of the rooms and viewer messages: default, or cjk-heavy (production-log-like)';

async function writeTasks(context: CliContext, out: string, tasks: Task[]): Promise<JsonlWriteResult> {
  const uri = toArtifactUri(out);
  const { store, key } = openArtifactObject(uri, uri.startsWith('s3://') ? context.env : {});
  try {
    return await writeJsonl(store, key, tasks, { schema: taskSchema });
  } finally {
    await store.close();
  }
}

/** The log's lines, strictly UTF-8 and at most HAT_MAX_RECORD_BYTES each (see readJsonlTextLines). */
async function* readLines(source: string, context: CliContext): AsyncGenerator<string> {
  const uri = toArtifactUri(source);
  setLargestRecordBytes(context.env.HAT_MAX_RECORD_BYTES);
  const { store, key } = openArtifactObject(uri, uri.startsWith('s3://') ? context.env : {});
  try {
    for await (const line of readJsonlTextLines(store, key)) yield line.text;
  } finally {
    await store.close();
  }
}

function countByCategory(tasks: Task[]): Partial<Record<TaskCategory, number>> {
  const counts: Partial<Record<TaskCategory, number>> = {};
  for (const task of tasks) counts[task.category] = (counts[task.category] ?? 0) + 1;
  return counts;
}

function printCounts(context: CliContext, counts: Partial<Record<TaskCategory, number>>): void {
  for (const category of taskCategories)
    if (counts[category] !== undefined) context.print(`  ${category.padEnd(22)} ${counts[category]}`);
}

const registerGenerate = (tasks: Command, context: CliContext): void => {
  tasks
    .command('generate')
    .description('generate simulator tasks (self-contained rooms, viewer turns, expectations) as gzip JSONL')
    .requiredOption('--count <n>', 'number of tasks', positiveInteger('--count', 1_000_000))
    .requiredOption('--seed <seed>', 'seed: the same seed gives byte-identical output')
    .requiredOption('--out <path-or-uri>', 'output object: a local path or s3://bucket/key.jsonl.gz / file:///abs/path')
    .option('--items <n>', 'catalog size the rooms are drawn from (default 2000)', positiveInteger('--items', 100_000))
    .option('--weights <list>', 'category weights, e.g. price=2,chit_chat=0', parseWeights)
    .option('--text <style>', textHelp, parseTextStyle)
    .option('--json', 'print the summary as JSON')
    .action(
      async (options: {
        count: number;
        seed: string;
        out: string;
        items?: number;
        weights?: Partial<Record<TaskCategory, number>>;
        text?: TextStyle;
        json?: boolean;
      }) => {
        const generated = generateTasks({
          count: options.count,
          seed: options.seed,
          world: { itemCount: options.items },
          categoryWeights: options.weights,
          text: options.text,
        });
        const written = await writeTasks(context, options.out, generated);
        const summary = {
          uri: written.uri,
          records: written.records,
          bytes: written.bytes,
          sha256: written.sha256,
          byCategory: countByCategory(generated),
        };
        if (options.json) return context.printJson(summary);
        context.print(
          `wrote ${summary.records} tasks to ${summary.uri} (${summary.bytes} bytes, sha256 ${summary.sha256.slice(0, 16)}…)`,
        );
        printCounts(context, summary.byCategory);
      },
    );
};

const registerImport = (tasks: Command, context: CliContext): void => {
  tasks
    .command('import')
    .description(
      'turn production live-room logs (JSONL, see shared/simulator/LOG_FORMAT.md) into redacted, deduplicated, classified tasks',
    )
    .argument('<logs>', 'log file: a local path or URI (.gz is gunzipped)')
    .requiredOption('--out <path-or-uri>', 'output object (gzip JSONL of tasks)')
    .option('--on-bad-line <mode>', 'skip: report malformed lines and go on; fail: exit 2 listing them', 'skip')
    .option(
      '--per-category <n>',
      'keep at most n tasks per category (seeded sample)',
      positiveInteger('--per-category'),
    )
    .option('--seed <seed>', 'seed of the per-category sample', '0')
    .option('--json', 'print the report as JSON')
    .action(
      async (
        logs: string,
        options: { out: string; onBadLine: string; perCategory?: number; seed: string; json?: boolean },
      ) => {
        if (options.onBadLine !== 'skip' && options.onBadLine !== 'fail') {
          throw new BadInputError(
            'BAD_OPTION',
            `--on-bad-line must be skip or fail, got ${JSON.stringify(options.onBadLine)}`,
          );
        }
        const { tasks: imported, report } = await importProductionLogs(readLines(logs, context), {
          file: logs,
          onBadLine: options.onBadLine,
          perCategory: options.perCategory,
          seed: options.seed,
        });
        const written = await writeTasks(context, options.out, imported);
        for (const problem of report.badLines.slice(0, 20))
          context.stderr.write(`hat: skipped bad line: ${formatProblem(problem)}\n`);
        if (report.badLines.length > 20)
          context.stderr.write(`hat: … and ${report.badLines.length - 20} more bad-line problems\n`);
        if (options.json) return context.printJson({ uri: written.uri, records: written.records, ...report });
        context.print(`read ${report.lines} lines: ${written.records} tasks written to ${written.uri}`);
        context.print(
          `  bad lines skipped: ${new Set(report.badLines.map((problem) => problem.line)).size}, duplicates: ${report.duplicates}, unclassified: ${report.unclassified.length}`,
        );
        context.print(
          `  redacted: ${
            Object.entries(report.redactions)
              .map(([kind, count]) => `${kind} ${count}`)
              .join(', ') || 'nothing'
          }`,
        );
        const ignored = Object.entries(report.ignoredFields)
          .map(([path, lines]) => `${path} ${lines} line${lines === 1 ? '' : 's'}`)
          .join(', ');
        context.print(`  ignored fields (not in the log format, not copied into tasks): ${ignored || 'none'}`);
        printCounts(context, report.imported);
      },
    );
};

function formatSummary(name: string, summary: RewardSummary): string {
  return `  ${name.padEnd(22)} ${String(summary.episodes).padStart(6)} ${summary.mean.toFixed(3).padStart(6)} ${summary.p10.toFixed(3).padStart(6)} ${(summary.shareAtLeast095 * 100).toFixed(1).padStart(6)}%`;
}

interface ExpertReportOptions {
  count: number;
  seed: string;
  harness?: string;
  items?: number;
  text?: TextStyle;
  json?: boolean;
}

const registerExpertReport = (tasks: Command, context: CliContext): void => {
  tasks
    .command('expert-report')
    .description('play generated tasks with the scripted expert and print its reward distribution by category')
    .option('--count <n>', 'number of tasks', positiveInteger('--count', 1_000_000), 2000)
    .requiredOption('--seed <seed>', 'task seed')
    .option('--harness <dir>', 'harness directory (default: the sample live-host harness)')
    .option('--items <n>', 'catalog size (default 2000)', positiveInteger('--items', 100_000))
    .option('--text <style>', textHelp, parseTextStyle)
    .option('--json', 'print the report as JSON')
    .action(async (options: ExpertReportOptions) => {
      const harness = await loadHarness(options.harness ?? sampleHarnessDirectory());
      const report = await expertReport({
        count: options.count,
        seed: options.seed,
        harness,
        world: { itemCount: options.items },
        text: options.text,
      });
      if (options.json) return context.printJson(report);
      context.print(
        `scripted expert on ${report.count} tasks (seed ${report.seed}, harness ${report.harness.id} ${report.harness.hash.slice(0, 12)})`,
      );
      context.print(
        `  ${'category'.padEnd(22)} ${'tasks'.padStart(6)} ${'mean'.padStart(6)} ${'p10'.padStart(6)} ${'>=0.95'.padStart(7)}`,
      );
      for (const category of taskCategories) {
        const summary = report.byCategory[category];
        if (summary !== undefined) context.print(formatSummary(category, summary));
      }
      context.print(formatSummary('all', report.overall));
      if (report.notOk > 0) context.print(`  episodes not ending ok: ${report.notOk}`);
    });
};

export const registerTasksCommand: RegisterCommand = (program, context) => {
  const tasks = program
    .command('tasks')
    .description('simulator task sets: generate, import production logs, expert reward report');
  registerGenerate(tasks, context);
  registerImport(tasks, context);
  registerExpertReport(tasks, context);
};
