/**
 * The augment work alone, as `bench/augment.bench.ts` measures it and `bench/load-100k.ts` sets
 * the pipeline against it: every trajectory parsed from its JSON line, its recorded episode
 * parsed and (with the replay check) scored, rewritten into its assigned variants, each rewrite
 * replay-checked and written back as JSON text. Tasks are looked up in a map parsed beforehand;
 * nothing is read from or written to storage. One thread, no queue.
 */
import { performance } from 'node:perf_hooks';
import type { Harness } from '../shared/harness/harness-types';
import { augmentTrajectory, prepareVariant, type PreparedVariant } from '../shared/harness/hsa/augment-trajectory';
import { defaultFamilyWeights, generateVariantPool } from '../shared/harness/hsa/generate-variant';
import { parseRecordedTrajectory } from '../shared/harness/hsa/rewrite-trajectory';
import { renderContextOf } from '../shared/simulator/room-context';
import type { Task } from '../shared/simulator/tasks/task-schema';
import { createWorld } from '../shared/simulator/world/world';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { assignVariants } from '../workers/augment/augment-part';
import { replayCheck, scoreRecorded, scoredTurns } from '../workers/augment/replay-check';
import { median } from '../shared/metrics/percentile';

export interface AugmentLoop {
  harness: Harness;
  /** The variant pool, prepared once (as a worker does once per run). */
  prepared: PreparedVariant[];
  /** Rejected draws while making the pool. */
  rejected: number;
  /** Seeds the assignment of variants to trajectories. */
  seed: string;
  variants: number;
}

/** The pool the augment stage draws for this seed and size (the stage's default family weights). */
export function prepareAugmentLoop(
  harness: Harness,
  options: { pool: number; seed: string; variants: number },
): AugmentLoop {
  const pool = generateVariantPool(harness, { size: options.pool, seed: options.seed, weights: defaultFamilyWeights });
  return {
    harness,
    prepared: pool.variants.map((variant) => prepareVariant(harness, variant)),
    rejected: pool.rejected.length,
    seed: options.seed,
    variants: options.variants,
  };
}

/**
 * One pass over `lines` (trajectories as JSON text). Returns how many rewrites were written and
 * the characters of JSON they came to (so the work cannot be optimized away).
 */
export function augmentLoopPass(
  loop: AugmentLoop,
  lines: readonly string[],
  tasksById: ReadonlyMap<string, Task>,
  replay: boolean,
): { written: number; characters: number } {
  let written = 0;
  let characters = 0;
  for (const line of lines) {
    const trajectory = JSON.parse(line) as Trajectory;
    const task = tasksById.get(trajectory.taskId);
    if (!task) throw new Error(`trajectory ${trajectory.id}: task ${trajectory.taskId} is not among the tasks read`);
    const world = createWorld(task.room);
    const context = renderContextOf(world);
    const parsed = parseRecordedTrajectory(trajectory, loop.harness, context);
    if (!parsed.ok) continue;
    const recorded = replay ? scoreRecorded(task, world, loop.harness, trajectory) : undefined;
    for (const index of assignVariants(loop.seed, trajectory.id, loop.prepared.length, loop.variants)) {
      const variant = loop.prepared[index];
      const outcome = augmentTrajectory(trajectory, parsed.timeline, context, variant);
      if (!outcome.ok) continue;
      if (replay) {
        const result = replayCheck({
          task,
          world,
          variant: variant.variant.harness,
          messages: outcome.trajectory.messages,
          calls: outcome.calls,
          recordedReward: recorded as Trajectory['reward'],
          turnCount: scoredTurns(trajectory, task),
        });
        if (!result.ok) continue;
      }
      characters += JSON.stringify(outcome.trajectory).length;
      written++;
    }
  }
  return { written, characters };
}

/**
 * Runs every pass `repeats` times, interleaved (so load from other processes falls on all of them
 * alike). Per pass: the median of written trajectories per second, of input lines per second, and
 * of this process's CPU time per input line (µs).
 */
export function measurePasses(
  repeats: number,
  inputs: number,
  passes: Array<() => number>,
): Array<{ perSecond: number; linesPerSecond: number; cpuMicrosPerLine: number; written: number }> {
  const rates = passes.map(() => [] as number[]);
  const lineRates = passes.map(() => [] as number[]);
  const cpu = passes.map(() => [] as number[]);
  const written = passes.map(() => 0);
  for (let repeat = 0; repeat < repeats; repeat++) {
    passes.forEach((pass, index) => {
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      written[index] = pass();
      const seconds = (performance.now() - started) / 1000;
      const used = process.cpuUsage(cpuBefore);
      rates[index].push(written[index] / seconds);
      lineRates[index].push(inputs / seconds);
      cpu[index].push((used.user + used.system) / inputs);
    });
  }
  return passes.map((_, index) => ({
    perSecond: median(rates[index]),
    linesPerSecond: median(lineRates[index]),
    cpuMicrosPerLine: median(cpu[index]),
    written: written[index],
  }));
}
