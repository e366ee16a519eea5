import type { Trajectory } from '../../shared/trajectory/trajectory';
import type { CollectSelection, RejectionReason } from './collect-contract';

/** What became of one sample of a task. */
export type SampleDecision =
  | { trajectory: Trajectory; accepted: true }
  | { trajectory: Trajectory; accepted: false; reason: RejectionReason; detail: string };

/** Reward notes shown with a rejection: enough to see why, short enough for a report row. */
function notesOf(trajectory: Trajectory): string {
  const notes = trajectory.reward.notes.slice(0, 3).join('; ');
  return notes === '' ? '' : ` (${notes})`;
}

/**
 * The selection rule over the samples of one task, in sample order. A sample passes when its
 * episode ended `ok` with reward >= `minReward`; failed episodes are rejected with their status
 * (model_error, step_limit, timeout), low ones as below_threshold. `best` keeps the passing
 * sample with the highest reward (ties: the lowest sample index) and rejects the other passing
 * ones as not_selected; `all` keeps every passing sample.
 */
export function selectSamples(samples: readonly Trajectory[], selection: CollectSelection): SampleDecision[] {
  const passed = samples.filter(
    (trajectory) => trajectory.status === 'ok' && trajectory.reward.total >= selection.minReward,
  );
  let best: Trajectory | undefined;
  for (const trajectory of passed)
    if (best === undefined || trajectory.reward.total > best.reward.total) best = trajectory;
  return samples.map((trajectory): SampleDecision => {
    if (trajectory.status !== 'ok')
      return {
        trajectory,
        accepted: false,
        reason: trajectory.status,
        detail: trajectory.statusReason ?? trajectory.status,
      };
    if (trajectory.reward.total < selection.minReward) {
      return {
        trajectory,
        accepted: false,
        reason: 'below_threshold',
        detail: `reward ${trajectory.reward.total} < minReward ${selection.minReward}${notesOf(trajectory)}`,
      };
    }
    if (selection.mode === 'best' && trajectory !== best) {
      const winner = best as Trajectory;
      return {
        trajectory,
        accepted: false,
        reason: 'not_selected',
        detail: `sample ${winner.sampleIndex} scored ${winner.reward.total} (this one ${trajectory.reward.total})`,
      };
    }
    return { trajectory, accepted: true };
  });
}
