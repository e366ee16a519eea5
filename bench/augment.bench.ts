/**
 * HSA augmentation throughput against a plain JSON parse+stringify pass over the same
 * trajectories, in the same process and run, and what the replay check costs on top.
 *
 *   node dist/bench/augment.bench.js [--tasks 500] [--variants 4] [--pool 32] [--repeats 3]
 *
 * Trajectories come from the collect stage (in-process, the simulator's scripted expert as
 * teacher, generated tasks, the sample harness). Each pass reads every trajectory from its JSON line and
 * writes JSON lines out: the baseline writes the trajectory back, augmentation writes its
 * `--variants` rewrites (every check but replay), and the replay pass adds the replay check.
 * Throughput is per trajectory written (goal: augmentation >= 0.33 of the baseline); figures are
 * medians over --repeats, the passes interleaved. Then the augment stage runs in-process on the
 * collect stage's manifest and the counts per family and per check are printed.
 */
import { performance } from 'node:perf_hooks';
import { MemoryArtifactStore } from '../shared/artifacts/memory-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readManifest } from '../shared/artifacts/manifest';
import { hsaFamilies } from '../shared/harness/hsa/variant-mapping';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import type { Task } from '../shared/simulator/tasks/task-schema';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { augmentChecks } from '../shared/harness/hsa/augment-trajectory';
import { droppedTotal, type AugmentStats } from '../workers/augment/augment-stats';
import { augmentStage } from '../workers/augment/processor';
import { collectStage } from '../workers/collect/processor';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { augmentLoopPass, measurePasses, prepareAugmentLoop } from './augment-loop';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

interface BenchOptions {
  tasks: number;
  variants: number;
  pool: number;
  repeats: number;
}

function parseArguments(argv: string[]): BenchOptions {
  const value = (flag: string): string | undefined => {
    const index = argv.indexOf(flag);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  return {
    tasks: Number(value('--tasks') ?? 500),
    variants: Number(value('--variants') ?? 4),
    pool: Number(value('--pool') ?? 32),
    repeats: Number(value('--repeats') ?? 3),
  };
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/augment.bench.js [--tasks 500] [--variants 4] [--pool 32] [--repeats 3]');
  const options = parseArguments(process.argv.slice(2));
  const harness = await loadHarness(sampleHarnessDirectory());
  const store = new MemoryArtifactStore('bench');
  const stageOptions = {
    store,
    openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
    logger: silentLogger(),
    clock: { now: () => 0 },
    concurrency: 1,
    seed: 'augment-bench',
  };
  const setupStarted = performance.now();
  const collected = (
    await runStageLocally(
      collectStage,
      { generate: { count: options.tasks, seed: 'augment-bench' } },
      { ...stageOptions, outputPrefix: 'collect' },
    )
  ).output as { manifestUri: string };
  const collectManifest = await readManifest(store, store.keyOf(collected.manifestUri));
  const trajectories: Trajectory[] = [];
  const tasks: Task[] = [];
  for (const object of collectManifest.objects) {
    if (object.kind === 'trajectories')
      for await (const record of readJsonl<Trajectory>(store, object.key)) trajectories.push(record);
    if (object.kind === 'tasks') for await (const record of readJsonl<Task>(store, object.key)) tasks.push(record);
  }
  const lines = trajectories.map((trajectory) => JSON.stringify(trajectory));
  const tasksById = new Map(tasks.map((task) => [task.id, task]));
  console.log(
    `collect stage: ${trajectories.length} accepted trajectories of ${tasks.length} tasks in ${((performance.now() - setupStarted) / 1000).toFixed(1)} s (${(lines.reduce((sum, line) => sum + line.length, 0) / lines.length / 1024).toFixed(1)} KiB each as JSON)`,
  );

  const poolStarted = performance.now();
  // The stage draws the same pool (same seed): the assignment in the loop matches it.
  const loop = prepareAugmentLoop(harness, { pool: options.pool, seed: 'augment-bench', variants: options.variants });
  console.log(
    `pool of ${loop.prepared.length} variants in ${((performance.now() - poolStarted) / 1000).toFixed(2)} s (once per run and worker; ${loop.rejected} draws rejected)`,
  );

  let sink = 0;
  const baselinePass = () => {
    for (const line of lines) sink += JSON.stringify(JSON.parse(line) as Trajectory).length;
    return lines.length;
  };

  const augmentPass = (replay: boolean) => () => {
    const pass = augmentLoopPass(loop, lines, tasksById, replay);
    sink += pass.characters;
    return pass.written;
  };
  const [baseline, augmentOnly, withReplay] = measurePasses(options.repeats, lines.length, [
    baselinePass,
    augmentPass(false),
    augmentPass(true),
  ]);

  const ratio = augmentOnly.perSecond / baseline.perSecond;
  console.log('');
  console.log(`JSON parse+stringify      ${baseline.perSecond.toFixed(0).padStart(8)} trajectories/s`);
  console.log(
    `augment (no replay)       ${augmentOnly.perSecond.toFixed(0).padStart(8)} trajectories/s written (${augmentOnly.written} of ${lines.length} x ${options.variants})`,
  );
  console.log(
    `augment + replay check    ${withReplay.perSecond.toFixed(0).padStart(8)} trajectories/s written (${withReplay.written})`,
  );
  console.log(`ratio augment/baseline    ${ratio.toFixed(3)} (goal >= 0.33: ${ratio >= 0.33 ? 'met' : 'NOT met'})`);
  console.log(
    `replay check cost         ${((1 / withReplay.perSecond - 1 / augmentOnly.perSecond) * 1e6).toFixed(0)} us per written trajectory (x${(augmentOnly.perSecond / withReplay.perSecond).toFixed(2)} time)`,
  );

  // The stage itself on the collect stage's manifest (gzip JSONL in and out, variants stored, report): the counts per family and per check.
  const stageStarted = performance.now();
  await runStageLocally(
    augmentStage,
    { inputs: [collected.manifestUri], variantsPerTrajectory: options.variants, variantPool: options.pool },
    { ...stageOptions, outputPrefix: 'augment' },
  );
  const stats = JSON.parse((await store.getBuffer('augment/stats.json')).toString('utf8')) as AugmentStats;
  console.log('');
  console.log(
    `augment stage over ${stats.trajectories.read} trajectories x ${options.variants} variants (replay on): ${((performance.now() - stageStarted) / 1000).toFixed(1)} s`,
  );
  console.log(
    `pairs: generated ${stats.pairs.generated}, kept ${stats.pairs.kept}, dropped ${droppedTotal(stats.pairs)} ${JSON.stringify(stats.pairs.dropped)}, relabel ${stats.relabel}`,
  );
  console.log('family             generated     kept  dropped by reason');
  for (const family of hsaFamilies) {
    const counts = stats.families[family];
    console.log(
      `${family.padEnd(18)} ${String(counts.generated).padStart(9)} ${String(counts.kept).padStart(8)}  ${JSON.stringify(counts.dropped)}`,
    );
  }
  console.log('check              checked   failed');
  for (const check of augmentChecks)
    console.log(
      `${check.padEnd(18)} ${String(stats.checks[check].checked).padStart(7)} ${String(stats.checks[check].failed).padStart(8)}`,
    );
  if (sink < 0) console.log(sink);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
