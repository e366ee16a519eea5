import { augmentChecks, dropReasons, type AugmentCheck } from '../../shared/harness/hsa/augment-trajectory';
import { hsaFamilies, type HsaFamily } from '../../shared/harness/hsa/variant-mapping';

/**
 * Counts of one augment part (and, summed, of the stage): trajectories read, (trajectory,
 * variant) pairs generated, kept and dropped by reason, overall and per family (a pair counts
 * for every family its variant applies), and per check how many pairs it checked and failed.
 */

/** Stage-level reasons besides the checks': the trajectory's task is not among the inputs. */
export const stageDropReasons = [...dropReasons, 'missing_task'] as const;
export type StageDropReason = (typeof stageDropReasons)[number];

export interface PairCounts {
  generated: number;
  kept: number;
  dropped: Partial<Record<StageDropReason, number>>;
}

export interface AugmentStats {
  trajectories: { read: number; unparseable: number; missingTask: number };
  pairs: PairCounts;
  families: Record<HsaFamily, PairCounts>;
  checks: Record<AugmentCheck, { checked: number; failed: number }>;
  relabel: number;
}

function emptyCounts(): PairCounts {
  return { generated: 0, kept: 0, dropped: {} };
}

export function emptyStats(): AugmentStats {
  return {
    trajectories: { read: 0, unparseable: 0, missingTask: 0 },
    pairs: emptyCounts(),
    families: Object.fromEntries(hsaFamilies.map((family) => [family, emptyCounts()])) as Record<HsaFamily, PairCounts>,
    checks: Object.fromEntries(
      augmentChecks.map((check) => [check, { checked: 0, failed: 0 }]),
    ) as AugmentStats['checks'],
    relabel: 0,
  };
}

/** Records one pair's outcome: `passed` checks counted as checked, `failed` as checked and failed. */
export function countPair(
  stats: AugmentStats,
  families: readonly HsaFamily[],
  outcome: { kept: true } | { kept: false; reason: StageDropReason },
  passed: readonly AugmentCheck[],
  failed?: AugmentCheck,
): void {
  const targets = [stats.pairs, ...families.map((family) => stats.families[family])];
  for (const counts of targets) {
    counts.generated++;
    if (outcome.kept) counts.kept++;
    else counts.dropped[outcome.reason] = (counts.dropped[outcome.reason] ?? 0) + 1;
  }
  for (const check of passed) stats.checks[check].checked++;
  if (failed !== undefined) {
    stats.checks[failed].checked++;
    stats.checks[failed].failed++;
  }
}

function addCounts(into: PairCounts, from: PairCounts): void {
  into.generated += from.generated;
  into.kept += from.kept;
  for (const reason of stageDropReasons) {
    const count = from.dropped[reason];
    if (count) into.dropped[reason] = (into.dropped[reason] ?? 0) + count;
  }
}

/** Sums part statistics (fan-in). */
export function mergeStats(parts: readonly AugmentStats[]): AugmentStats {
  const total = emptyStats();
  for (const part of parts) {
    total.trajectories.read += part.trajectories.read;
    total.trajectories.unparseable += part.trajectories.unparseable;
    total.trajectories.missingTask += part.trajectories.missingTask;
    addCounts(total.pairs, part.pairs);
    for (const family of hsaFamilies) addCounts(total.families[family], part.families[family]);
    for (const check of augmentChecks) {
      total.checks[check].checked += part.checks[check].checked;
      total.checks[check].failed += part.checks[check].failed;
    }
    total.relabel += part.relabel;
  }
  return total;
}

export function droppedTotal(counts: PairCounts): number {
  return Object.values(counts.dropped).reduce((sum, count) => sum + (count ?? 0), 0);
}
