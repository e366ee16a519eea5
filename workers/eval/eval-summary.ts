import type { StageSummary } from '../../queues/stage-kit/stage-summary';
import type { EvalOutput, EvalPartOutput } from './eval-contract';
import { findEvalSuite } from './suites/registry';

/** Run-report figures of eval: one leaderboard row per model (suite scores with intervals), overlaps and missing judge verdicts. */
export function summarizeEval(output: EvalOutput): StageSummary {
  const figures: StageSummary['figures'] = Object.entries(output.leaderboard).map(([label, suites]) => ({
    label: `leaderboard: ${label}${output.simulatedModels.includes(label) ? ' (dummy weights)' : ''}`,
    value: Object.entries(suites)
      .map(
        ([suite, cell]) =>
          `${findEvalSuite(suite)?.shortName ?? suite} ${cell.score.toFixed(1)} [${cell.low.toFixed(1)}, ${cell.high.toFixed(1)}]`,
      )
      .join(' · ')
      .concat(output.errors?.[label] ? ` · error rate ${(output.errors[label].rate * 100).toFixed(1)}%` : ''),
    ...(output.simulatedModels.includes(label)
      ? { tone: 'warn' as const, detail: 'random-weight or simulated model: plumbing, not quality' }
      : {}),
  }));
  figures.push({ label: 'eval items', value: output.items });
  for (const [label, errors] of Object.entries(output.errors ?? {}))
    if (errors.failed > 0)
      figures.push({
        label: `failed items: ${label}`,
        value: `${errors.failed} of ${errors.items} (error rate ${(errors.rate * 100).toFixed(1)}%)`,
        tone: 'warn',
        detail: 'scored 0 on every check they carry; listed in the eval report',
      });
  for (const claim of output.claims ?? [])
    figures.push({
      label: claim.reproduced ? 'claim reproduced' : 'claim not reproduced',
      value: claim.sentence,
      ...(claim.reproduced ? {} : { tone: 'warn' as const }),
    });
  if (output.overlapping > 0)
    figures.push({
      label: 'items seen in training',
      value: output.overlapping,
      tone: 'warn',
      detail: 'allowOverlap: true; listed in the eval report',
    });
  if (output.cache && output.cache.hits + output.cache.misses > 0) {
    const calls = output.cache.hits + output.cache.misses;
    figures.push({
      label: 'response cache',
      value: `${output.cache.hits} of ${calls} model calls answered from the cache (${((output.cache.hits / calls) * 100).toFixed(1)}%); ${output.cache.misses} requests sent`,
    });
  }
  if (output.judgeMissing > 0)
    figures.push({
      label: 'judge verdicts missing',
      value: output.judgeMissing,
      tone: 'warn',
      detail: 'rule scores unaffected',
    });
  return {
    figures,
    links: [
      { label: 'eval report', uri: output.reportUri },
      { label: 'scores', uri: output.scoresUri },
    ],
  };
}

/** Prometheus counters of one part: items evaluated, model errors. */
export function evalPartCounters(part: EvalPartOutput): Record<string, number> {
  return { items: part.items, model_errors: part.modelErrors };
}
