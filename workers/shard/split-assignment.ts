import { Rng } from '../../shared/random/rng';
import type { ShardInput, ShardSplit } from './shard-contract';

/** What the split of one sample depends on. */
export interface SplitFacts {
  taskId: string;
  /** `harness.variantHash` of the trajectory, when it was produced or rewritten under an HSA variant. */
  variantHash?: string;
  /** HSA families the variant applied. */
  families?: string[];
}

export type HeldOutSettings = ShardInput['heldOut'];

/** A seeded uniform draw in [0, 1) per task: the same task id and seed always give the same draw, whatever else is in the data. */
export function taskDraw(seed: string, taskId: string): number {
  return new Rng(`${seed}/split/${taskId}`).next();
}

/** True when the sample was produced under a harness variant that must stay out of training. */
export function isHeldOut(facts: SplitFacts, heldOut: HeldOutSettings): boolean {
  if (facts.variantHash !== undefined && heldOut.variantHashes.includes(facts.variantHash)) return true;
  return (facts.families ?? []).some((family) => heldOut.families.includes(family));
}

/**
 * The split of every sample, decided by task so that no task is on both sides:
 * - a sample under a held-out variant goes to `heldOut.split` (default `heldout`);
 * - any other sample of a task that has a held-out sample goes to validation (the task is seen
 *   in evaluation, so it must not be trained);
 * - every other task goes to validation when its seeded draw is below `validationFraction`,
 *   else to train.
 */
export function assignSplits(
  samples: readonly SplitFacts[],
  options: { seed: string; validationFraction: number; heldOut: HeldOutSettings },
): ShardSplit[] {
  const heldOutTasks = new Set(
    samples.filter((sample) => isHeldOut(sample, options.heldOut)).map((sample) => sample.taskId),
  );
  const draws = new Map<string, number>();
  return samples.map((sample) => {
    if (isHeldOut(sample, options.heldOut)) return options.heldOut.split;
    if (heldOutTasks.has(sample.taskId)) return 'validation';
    let draw = draws.get(sample.taskId);
    if (draw === undefined) draws.set(sample.taskId, (draw = taskDraw(options.seed, sample.taskId)));
    return draw < options.validationFraction ? 'validation' : 'train';
  });
}
