import { formatPercent } from '../../shared/metrics/format-percent';
import type { StageFigure, StageSummary } from '../../queues/stage-kit/stage-summary';
import type { ShardOutput } from './shard-contract';

/** Run-report figures of shard: samples kept and the tokens of each split. */
export function summarizeShard(output: ShardOutput): StageSummary {
  const rejected = Object.values(output.rejected).reduce((sum, count) => sum + count, 0);
  const reasons = Object.entries(output.rejected)
    .filter(([, count]) => count > 0)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(', ');
  const splits = Object.entries(output.splits).map(([split, figures]): StageFigure => ({
    label: `${split} tokens`,
    value: figures.tokens,
    detail: `${figures.samples} samples in ${figures.sequences} sequences; ${figures.trainedTokens.toLocaleString('en-US')} trained tokens; fill ${formatPercent(figures.fill)}`,
  }));
  return {
    figures: [
      { label: 'samples', value: output.samples, detail: `${output.duplicates} duplicates removed` },
      {
        label: 'rejected records',
        value: rejected,
        // Amber only past the configured share: a few refusals are normal, many mean a template or data problem.
        ...(output.refusedShare > output.warnRefusedShare ? { tone: 'warn' as const } : {}),
        ...(rejected > 0 ? { detail: `${(output.refusedShare * 100).toFixed(1)}% of unique records: ${reasons}` } : {}),
      },
      ...output.templateWarnings.map((warning): StageFigure => ({
        label: 'template',
        value: 'check',
        tone: 'warn',
        detail: warning,
      })),
      {
        label: 'over length',
        value: output.overLength.dropped + output.overLength.truncated,
        detail: `${output.overLength.dropped} dropped, ${output.overLength.truncated} truncated`,
      },
      ...splits,
    ],
    links: [{ label: 'dataset card', uri: output.cardUri }],
  };
}
