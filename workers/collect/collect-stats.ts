import { z } from 'zod';
import type { Trajectory } from '../../shared/trajectory/trajectory';

/**
 * Counts of the collect stage, per task category: parts add them up, finish merges the parts in
 * part order (so float sums come out the same on every run) and derives the rates.
 */

const count = z.number().int().nonnegative();

export const collectCountsSchema = z.object({
  tasks: count,
  /** Tasks with at least one accepted sample. */
  tasksAccepted: count,
  /** Tasks listed for review (no accepted sample). */
  review: count,
  samples: count,
  /** Samples whose episode ended ok with reward >= minReward. */
  samplesPassed: count,
  accepted: count,
  /** Rejected samples by reason (see rejectionReasons). */
  rejected: z.record(z.string(), count),
  rewardSumAccepted: z.number().nonnegative(),
  rewardSumSamples: z.number().nonnegative(),
  /** Model calls that returned (retries not counted). */
  calls: count,
  /** HTTP attempts behind those calls (calls + retries). */
  attempts: count,
  promptTokens: count,
  completionTokens: count,
  /** Model time (sum of calls' send-to-last-chunk), ms. */
  modelMs: z.number().nonnegative(),
  /** Simulated tool time, ms. */
  toolMs: z.number().nonnegative(),
});
export type CollectCounts = z.infer<typeof collectCountsSchema>;

export function emptyCounts(): CollectCounts {
  return {
    tasks: 0,
    tasksAccepted: 0,
    review: 0,
    samples: 0,
    samplesPassed: 0,
    accepted: 0,
    rejected: {},
    rewardSumAccepted: 0,
    rewardSumSamples: 0,
    calls: 0,
    attempts: 0,
    promptTokens: 0,
    completionTokens: 0,
    modelMs: 0,
    toolMs: 0,
  };
}

/** Adds one sample's episode: its reward, calls, tokens and time. */
export function addSample(counts: CollectCounts, trajectory: Trajectory): void {
  counts.samples++;
  counts.rewardSumSamples += trajectory.reward.total;
  for (const call of trajectory.calls) {
    counts.calls++;
    counts.attempts += call.attempts;
    counts.promptTokens += call.promptTokens;
    counts.completionTokens += call.completionTokens;
    counts.modelMs += call.e2eMs;
    counts.toolMs += call.toolMs;
  }
}

export function mergeCounts(into: CollectCounts, from: CollectCounts): CollectCounts {
  for (const key of Object.keys(from) as Array<keyof CollectCounts>) {
    if (key === 'rejected') {
      for (const [reason, value] of Object.entries(from.rejected))
        into.rejected[reason] = (into.rejected[reason] ?? 0) + value;
    } else {
      into[key] += from[key];
    }
  }
  return into;
}

/** Category counts of several parts merged (in the order given), and the total over categories. */
export function mergeCategoryCounts(parts: ReadonlyArray<Record<string, CollectCounts>>): {
  byCategory: Record<string, CollectCounts>;
  total: CollectCounts;
} {
  const byCategory: Record<string, CollectCounts> = {};
  for (const part of parts) {
    for (const [category, counts] of Object.entries(part))
      mergeCounts((byCategory[category] ??= emptyCounts()), counts);
  }
  const sorted = Object.fromEntries(Object.entries(byCategory).sort(([left], [right]) => (left < right ? -1 : 1)));
  const total = emptyCounts();
  for (const counts of Object.values(sorted)) mergeCounts(total, counts);
  return { byCategory: sorted, total };
}

/** Rates and means people read (4 decimals). */
export interface DerivedFigures {
  /** Tasks with an accepted trajectory / tasks. */
  acceptanceRate: number;
  /** Samples that passed the threshold / samples. */
  samplePassRate: number;
  meanAcceptedReward: number;
  meanSampleReward: number;
  /** Retries per call. */
  retriesPerCall: number;
}

function ratio(part: number, whole: number): number {
  return whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000;
}

export function deriveFigures(counts: CollectCounts): DerivedFigures {
  return {
    acceptanceRate: ratio(counts.tasksAccepted, counts.tasks),
    samplePassRate: ratio(counts.samplesPassed, counts.samples),
    meanAcceptedReward: ratio(counts.rewardSumAccepted, counts.accepted),
    meanSampleReward: ratio(counts.rewardSumSamples, counts.samples),
    retriesPerCall: ratio(counts.attempts - counts.calls, counts.calls),
  };
}

export function rejectedTotal(counts: CollectCounts): number {
  return Object.values(counts.rejected).reduce((sum, value) => sum + value, 0);
}
