import type { StageSummary } from '../../queues/stage-kit/stage-summary';
import type { DistillOutput } from './distill-contract';

/** Run-report figures of distill: rollouts made and the student–teacher divergence. */
export function summarizeDistill(output: DistillOutput): StageSummary {
  return {
    figures: [
      { label: 'rollouts', value: output.rollouts, detail: `${output.prompts} prompts` },
      {
        label: 'mean reverse KL',
        value: output.meanReverseKl,
        unit: 'score',
        detail: 'token-weighted, student to teacher',
      },
      ...(output.dummyWeights
        ? [
            {
              label: 'weights',
              value: 'random (dummy)',
              tone: 'warn' as const,
              detail: 'figures show the pipeline, not a model; every record says dummy_weights',
            },
          ]
        : []),
      ...(output.studentEngine
        ? [
            {
              label: 'records',
              value: 'token-exact',
              detail:
                output.studentEngine === 'onnx'
                  ? 'student sampled in-process from token ids'
                  : `student sampled from token ids over ${output.studentEngine}'s API`,
            },
          ]
        : []),
    ],
    links: [{ label: 'stats', uri: output.statsUri }],
  };
}
