import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { BadInputError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import type { RlCurriculum } from './rl-contract';

/**
 * Curriculum weights from a previous rl run: categories the policy did worse on are sampled more.
 *
 *   w_c = (floor + 1 - r_c) ^ power
 *
 * where r_c is the category's mean reward over all scored episodes of the previous run
 * (`byCategory.<c>.all.mean` of its stats.json), clamped to [0, 1]. A category the previous run
 * did not score counts as r_c = 0 (never measured, sampled as if unsolved). `floor` keeps solved
 * categories in the mix; `power` > 1 sharpens the preference. A group's category is drawn with
 * probability w_c / sum of w over the categories present in the task set.
 */

const previousStatsSchema = z.looseObject({
  byCategory: z.record(z.string(), z.looseObject({ all: z.looseObject({ mean: z.number().nullable() }) })),
});

export interface CurriculumWeights {
  /** By category, for the categories asked about. */
  weights: Record<string, number>;
  /** The previous run's mean reward per category (null: not scored there). */
  previousMeans: Record<string, number | null>;
  lineage: { uri: string; sha256: string };
}

export function curriculumWeight(meanReward: number | null, options: Pick<RlCurriculum, 'floor' | 'power'>): number {
  const reward = meanReward === null ? 0 : Math.min(1, Math.max(0, meanReward));
  return (options.floor + 1 - reward) ** options.power;
}

/** Reads the previous stats (a stats.json, or a manifest whose `stats` hold them) and weighs `categories`. */
export async function readCurriculum(
  curriculum: RlCurriculum,
  categories: readonly string[],
  openObject: StageDeps['openObject'],
): Promise<CurriculumWeights> {
  const { store, key } = openObject(curriculum.statsUri);
  if (!(await store.head(key))) {
    throw new BadInputError(
      'MISSING_INPUT',
      `curriculum.statsUri: ${curriculum.statsUri} does not exist; point it at a previous rl run's stats.json or manifest.json`,
    );
  }
  const bytes = await store.getBuffer(key);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new BadInputError(
      'BAD_CURRICULUM_STATS',
      `curriculum.statsUri: ${curriculum.statsUri} is not JSON (${(error as Error).message})`,
    );
  }
  const stats = key.endsWith('manifest.json') ? (value as { stats?: unknown } | null)?.stats : value;
  const parsed = previousStatsSchema.safeParse(stats);
  if (!parsed.success) {
    throw new BadInputError(
      'BAD_CURRICULUM_STATS',
      `curriculum.statsUri: ${curriculum.statsUri} has no byCategory.<category>.all.mean figures (${parsed.error.issues[0]?.message ?? 'invalid'}); use the stats.json or manifest.json an rl run wrote`,
    );
  }
  const previousMeans = Object.fromEntries(
    categories.map((category) => [category, parsed.data.byCategory[category]?.all.mean ?? null]),
  );
  const weights = Object.fromEntries(
    categories.map((category) => [category, curriculumWeight(previousMeans[category] ?? null, curriculum)]),
  );
  return { weights, previousMeans, lineage: { uri: curriculum.statsUri, sha256: sha256Hex(bytes) } };
}
