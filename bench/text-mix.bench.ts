/**
 * Per-stage throughput on the production-log-like CJK-heavy text mix against the simulator's
 * default text, in the same process and run (issue 35: each stage's tasks/s on the CJK-heavy mix
 * >= 0.7 of its rate on the default mix). For each mix, `--tasks` generated tasks go through
 * collect (scripted teacher), augment (one HSA variant per trajectory, replay-checked) and shard
 * (Qwen3 template and tokenizer, 8192 tokens, the teacher trajectories plus the variants at
 * weight 0.5), as bench/load-100k.ts configures them, each stage in-process on `hat stage`'s path
 * (plan, parts one at a time, finish) with gzip JSONL on a file store in a temp directory. The
 * two mixes draw the same categories, rooms and intents (generate.text only changes the text), so
 * what differs is what the records hold. Rounds alternate which mix runs first; per stage the
 * median over rounds of tasks/s (and of tasks per CPU second, steadier on a shared machine) is
 * printed with the ratio cjk-heavy / default, beside the MB/s of its records (JSON text: the
 * tasks collect writes, the trajectories augment and shard read).
 * Then the records themselves: bytes per task and trajectory and their CJK byte share (whole
 * JSON lines; the messages' text; the text a task puts in a trajectory: viewer messages, tool
 * results' string values, replies), for both mixes. Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/text-mix.bench.js [--tasks 2000] [--rounds 3] [--only cjk-heavy]
 *
 * `--only <mix>` runs one mix alone (for `node --cpu-prof`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readManifest } from '../shared/artifacts/manifest';
import { silentLogger } from '../shared/log/logger';
import { median } from '../shared/metrics/percentile';
import type { Task } from '../shared/simulator/tasks/task-schema';
import { textStyles, type TextStyle } from '../shared/simulator/world/text-style';
import { cjkBytes } from '../shared/text/cjk-bytes';
import { withoutHookBlocks } from '../shared/text/hook-messages';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import type { AnyStage } from '../queues/stage-kit/define-stage';
import { augmentStage } from '../workers/augment/processor';
import { collectStage } from '../workers/collect/processor';
import { shardStage } from '../workers/shard/processor';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

const usage = 'node dist/bench/text-mix.bench.js [--tasks 2000] [--rounds 3] [--only cjk-heavy]';
const stageNames = ['collect', 'augment', 'shard'] as const;
type StageName = (typeof stageNames)[number];

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
}

interface StageTiming {
  seconds: number;
  cpuSeconds: number;
  /** Bytes of the stage's records as JSON text: the tasks collect writes, the trajectories augment and shard read. */
  inputBytes: number;
}

interface MixRun {
  timings: Record<StageName, StageTiming>;
  /** Tasks whose trajectory collect accepted (the scripted expert's passes). */
  accepted: number;
  /** What the stages wrote, for the record figures (first round only). */
  tasks: Task[];
  trajectories: Trajectory[];
}

async function recordsOf<T>(store: FileArtifactStore, manifestUri: string, kind: string): Promise<T[]> {
  const manifest = await readManifest(store, store.keyOf(manifestUri));
  const records: T[] = [];
  for (const object of manifest.objects.filter((entry) => entry.kind === kind))
    for await (const record of readJsonl<T>(store, object.key)) records.push(record);
  return records;
}

const bytesOf = (records: unknown[]) =>
  records.reduce<number>((sum, record) => sum + Buffer.byteLength(JSON.stringify(record)), 0);

/** collect -> augment -> shard for one mix, each stage timed alone. */
async function runMix(text: TextStyle, tasks: number, keepRecords: boolean): Promise<MixRun> {
  const directory = await mkdtemp(join(tmpdir(), `hat-text-mix-${text}-`));
  const store = new FileArtifactStore(directory);
  const options = {
    store,
    openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
    logger: silentLogger(),
    clock: { now: () => Date.UTC(2025, 0, 2) },
    concurrency: 1,
    seed: 'text-mix',
  };
  const timed = async (name: StageName, stage: AnyStage, config: unknown) => {
    const cpu = process.cpuUsage();
    const started = performance.now();
    const result = await runStageLocally(stage, config, { ...options, outputPrefix: name });
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    return {
      output: result.output as { manifestUri: string; accepted?: number },
      seconds,
      cpuSeconds: (used.user + used.system) / 1e6,
    };
  };
  try {
    const part = Math.max(1, Math.ceil(tasks / 8));
    const collect = await timed('collect', collectStage, {
      generate: { count: tasks, seed: 'text-mix', itemCount: 2000, text },
      tasksPerPart: part,
    });
    const collectUri = collect.output.manifestUri;
    const augment = await timed('augment', augmentStage, {
      trajectories: [collectUri],
      tasks: [collectUri],
      variantsPerTrajectory: 1,
      recordsPerPart: part,
    });
    const shard = await timed('shard', shardStage, {
      inputs: [
        { uri: collectUri, name: 'teacher' },
        { uri: augment.output.manifestUri, weight: 0.5, name: 'hsa' },
      ],
      tokenizer: { preset: 'qwen3' },
      sequenceLength: 8192,
      recordsPerPart: part,
      renderDate: '2025-01-02T00:00:00Z',
    });
    const generated = await recordsOf<Task>(store, collectUri, 'tasks');
    const teacher = await recordsOf<Trajectory>(store, collectUri, 'trajectories');
    const variants = await recordsOf<Trajectory>(store, augment.output.manifestUri, 'trajectories');
    const teacherBytes = bytesOf(teacher);
    return {
      timings: {
        collect: { ...collect, inputBytes: bytesOf(generated) },
        augment: { ...augment, inputBytes: teacherBytes },
        shard: { ...shard, inputBytes: teacherBytes + bytesOf(variants) },
      },
      accepted: collect.output.accepted ?? 0,
      tasks: keepRecords ? generated : [],
      trajectories: keepRecords ? teacher : [],
    };
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

/** Every string value inside a JSON value (keys left out). */
function stringValues(value: unknown, into: string[]): void {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const entry of value) stringValues(entry, into);
  else if (value !== null && typeof value === 'object')
    for (const entry of Object.values(value)) stringValues(entry, into);
}

/** The text a task puts in a trajectory: the viewer's words, the tool results' string values, the replies. */
function taskText(trajectory: Trajectory): string[] {
  const texts: string[] = [];
  for (const message of trajectory.messages) {
    if (message.role === 'user') texts.push(message.content.split('\n')[0]);
    else if (message.role === 'assistant' && message.content !== null) texts.push(message.content);
    else if (message.role === 'tool') {
      try {
        stringValues(JSON.parse(withoutHookBlocks(message.content)), texts);
      } catch {
        texts.push(message.content);
      }
    }
  }
  return texts;
}

function shareRow(texts: string[], count: number): { perRecord: string; cjk: string } {
  let bytes = 0;
  let cjk = 0;
  for (const text of texts) {
    const counted = cjkBytes(text);
    bytes += counted.bytes;
    cjk += counted.cjk;
  }
  return {
    perRecord: `${(bytes / count / 1024).toFixed(1)} KiB`,
    cjk: `${((cjk / Math.max(1, bytes)) * 100).toFixed(1)}%`,
  };
}

function recordFigures(run: MixRun): Record<string, { perRecord: string; cjk: string }> {
  const { tasks, trajectories } = run;
  const messageText = trajectories.flatMap((trajectory) => trajectory.messages.map((message) => message.content ?? ''));
  return {
    'task (JSON line)': shareRow(
      tasks.map((task) => JSON.stringify(task)),
      tasks.length,
    ),
    'trajectory (JSON line)': shareRow(
      trajectories.map((trajectory) => JSON.stringify(trajectory)),
      trajectories.length,
    ),
    'trajectory: message text': shareRow(messageText, trajectories.length),
    'trajectory: system prompt': shareRow(
      trajectories.flatMap((trajectory) =>
        trajectory.messages.flatMap((message) => (message.role === 'system' ? [message.content] : [])),
      ),
      trajectories.length,
    ),
    'trajectory: tool schemas': shareRow(
      trajectories.map((trajectory) => JSON.stringify(trajectory.tools)),
      trajectories.length,
    ),
    'trajectory: text the task writes': shareRow(trajectories.flatMap(taskText), trajectories.length),
  };
}

async function main(): Promise<void> {
  checkBenchFlags(usage);
  const tasks = Number(flag('--tasks') ?? 2000);
  const rounds = Number(flag('--rounds') ?? 3);
  const only = flag('--only');
  if (only !== undefined && !(textStyles as readonly string[]).includes(only)) {
    process.stderr.write(`--only must be one of ${textStyles.join(', ')}\nusage: ${usage}\n`);
    process.exit(2);
  }
  const mixes = (only !== undefined ? [only] : textStyles) as TextStyle[];

  // Warm-up: module loading, the tokenizer and JIT stay out of the first round's figures.
  for (const text of mixes) await runMix(text, Math.min(100, tasks), false);

  const runs = new Map<TextStyle, MixRun[]>(mixes.map((text) => [text, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? mixes : [...mixes].reverse();
    for (const text of order) {
      const run = await runMix(text, tasks, round === 0);
      runs.get(text)!.push(run);
      const line = stageNames
        .map((name) => `${name} ${(tasks / run.timings[name].seconds).toFixed(0)} tasks/s`)
        .join(', ');
      console.error(`round ${round + 1}/${rounds} ${text}: ${line}`);
    }
  }

  const figures = (text: TextStyle, name: StageName) => {
    const timings = runs.get(text)!.map((run) => run.timings[name]);
    return {
      tasksPerSecond: median(timings.map((timing) => tasks / timing.seconds)),
      tasksPerCpuSecond: median(timings.map((timing) => tasks / timing.cpuSeconds)),
      megabytesPerSecond: median(timings.map((timing) => timing.inputBytes / 1e6 / timing.seconds)),
    };
  };
  console.log(
    `${tasks} generated tasks a mix through collect -> augment -> shard, in-process, parts one at a time; median of ${rounds} round(s)`,
  );
  const table: Record<string, Record<string, string>> = {};
  const ratios: Record<string, { wall: number; cpu: number }> = {};
  for (const name of stageNames) {
    const row: Record<string, string> = {};
    for (const text of mixes) {
      const figure = figures(text, name);
      row[`${text} tasks/s`] = figure.tasksPerSecond.toFixed(1);
      row[`${text} MB/s`] = figure.megabytesPerSecond.toFixed(1);
    }
    if (mixes.length === 2) {
      const [base, heavy] = [figures('default', name), figures('cjk-heavy', name)];
      ratios[name] = {
        wall: heavy.tasksPerSecond / base.tasksPerSecond,
        cpu: heavy.tasksPerCpuSecond / base.tasksPerCpuSecond,
      };
      row['cjk/default'] = ratios[name].wall.toFixed(2);
      row['cjk/default per CPU s'] = ratios[name].cpu.toFixed(2);
    }
    table[name] = row;
  }
  console.table(table);
  console.log(
    `collect accepted (scripted expert): ${mixes.map((text) => `${text} ${runs.get(text)![0].accepted} of ${tasks}`).join(', ')}`,
  );
  console.log('records (first round): size and CJK share of their UTF-8 bytes');
  const records: Record<string, Record<string, string>> = {};
  for (const text of mixes)
    for (const [what, figure] of Object.entries(recordFigures(runs.get(text)![0]))) {
      records[what] ??= {};
      records[what][`${text} size`] = figure.perRecord;
      records[what][`${text} CJK`] = figure.cjk;
    }
  console.table(records);
  const round3 = (value: number) => Number(value.toFixed(3));
  console.log(
    JSON.stringify({
      benchmark: 'text-mix',
      tasks,
      rounds,
      ratios: Object.fromEntries(
        Object.entries(ratios).map(([name, ratio]) => [name, { wall: round3(ratio.wall), cpu: round3(ratio.cpu) }]),
      ),
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
