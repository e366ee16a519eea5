import { formatPercent } from '../../shared/metrics/format-percent';
import { shareOf, type StageFigure, type StageSummary } from '../../queues/stage-kit/stage-summary';
import type { AugmentOutput } from './augment-contract';

/** Run-report figures of augment: variants emitted and how each verification check went. */
export function summarizeAugment(output: AugmentOutput): StageSummary {
  const checks = Object.entries(output.checks).map(([check, counts]): StageFigure => ({
    label: `${check} check passed`,
    value: shareOf(counts.checked - counts.failed, counts.checked),
    unit: 'ratio',
    ...(counts.failed > 0 ? { tone: 'warn' as const } : {}),
    detail: counts.checked > 0 ? `${counts.failed} of ${counts.checked} variant trajectories failed` : 'not run',
  }));
  return {
    figures: [
      { label: 'variant trajectories', value: output.trajectories, detail: `over ${output.variants} harness variants` },
      {
        label: 'dropped by checks',
        value: output.dropped,
        detail: `${formatPercent(shareOf(output.dropped, output.dropped + output.trajectories))} of generated pairs`,
      },
      ...checks,
      { label: 'relabel entries', value: output.relabel, detail: 'trajectories to collect again under a variant' },
    ],
    links: [
      { label: 'augment report', uri: output.reportUri },
      { label: 'stats', uri: output.statsUri },
    ],
  };
}
