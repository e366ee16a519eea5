import { type StageSummary } from '../../queues/stage-kit/stage-summary';
import type { CollectOutput } from './collect-contract';

/** Run-report figures of collect: how many tasks got an accepted trajectory. */
export function summarizeCollect(output: CollectOutput): StageSummary {
  return {
    figures: [
      { label: 'tasks', value: output.tasks },
      {
        label: 'acceptance rate',
        value: output.acceptanceRate,
        unit: 'ratio',
        detail: 'tasks with an accepted trajectory',
      },
      {
        label: 'accepted trajectories',
        value: output.accepted,
        detail: `of ${output.samples} samples played; ${output.rejected} rejected by the verifier`,
      },
      {
        label: 'tasks to review',
        value: output.review,
        ...(output.review > 0 ? { tone: 'warn' as const } : {}),
        detail: 'no sample accepted; reasons in review.jsonl.gz',
      },
    ],
    links: [
      { label: 'collect report', uri: output.reportUri },
      { label: 'review list', uri: output.reviewUri },
      { label: 'stats', uri: output.statsUri },
    ],
  };
}
