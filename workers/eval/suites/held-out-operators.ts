import type { TrainingFootprint } from '../contamination';
import type { ItemHarness } from './suite-kit';

/**
 * Held-out operators of harness_variant_qa: held-out families a training stage applied, and
 * held-out operator variants training played (the checks `plan` refuses with
 * `[EVAL_HELD_OUT_TRAINED]` unless allowOverlap).
 */

type HarnessVariantItem = { id: string; harness: ItemHarness };

/** Stages whose records are trained on through a shard (its `heldOut.families` keeps a family out of them). */
const shardedStages = new Set(['collect', 'augment', 'shard', 'training data']);

/** A held-out family a training stage applied: how many of that stage's variants used it. */
export interface TrainedFamily {
  stage: string;
  family: string;
  variants: number;
}

/**
 * Held-out operator families that training variants applied, per stage. A family every shard of
 * the footprint held out of its train split (`heldOut.families`) was not trained on through the
 * shard, whatever the augment outputs behind it hold; rl trains on its own episodes, so a family
 * its variants applied counts whatever a shard holds out.
 */
export function trainedHeldOutFamilies(heldOut: readonly string[], footprint: TrainingFootprint): TrainedFamily[] {
  const counts = new Map<string, TrainedFamily>();
  for (const [hash, families] of footprint.variantFamilies)
    for (const stage of footprint.variantStages.get(hash) ?? ['training data'])
      for (const family of families) {
        if (!heldOut.includes(family)) continue;
        if (shardedStages.has(stage) && footprint.shardHeldOutFamilies?.has(family)) continue;
        const key = `${stage}/${family}`;
        const entry = counts.get(key) ?? { stage, family, variants: 0 };
        entry.variants += 1;
        counts.set(key, entry);
      }
  return [...counts.values()].sort((left, right) =>
    left.stage === right.stage ? left.family.localeCompare(right.family) : left.stage.localeCompare(right.stage),
  );
}

/** Held-out operator items whose variant training used (the same hash in a training stage's records). */
export function trainedHeldOutVariants(
  items: readonly HarnessVariantItem[],
  footprint: TrainingFootprint,
): Array<{ itemId: string; hash: string; stages: string[] }> {
  const found: Array<{ itemId: string; hash: string; stages: string[] }> = [];
  for (const item of items) {
    if (item.harness.kind !== 'variant' || !item.harness.heldOutOperator) continue;
    if (!footprint.variantHashes.has(item.harness.hash)) continue;
    found.push({
      itemId: item.id,
      hash: item.harness.hash,
      stages: [...(footprint.variantStages.get(item.harness.hash) ?? ['training data'])].sort(),
    });
  }
  return found;
}
