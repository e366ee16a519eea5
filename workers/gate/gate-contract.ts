import { z } from 'zod';
import type { StageContract } from '../../queues/stage-kit/define-stage';
import type { StageSummary } from '../../queues/stage-kit/stage-summary';

/**
 * Config of the `gate` stage. A run's `gate:` section plans it (queues/runs/run-gate.ts); it can also
 * run alone: `hat stage gate --config gate.yaml --out <uri>`.
 *
 * ```yaml
 * scores: s3://hat/runs/nightly-1/eval/manifest.json   # an eval manifest or its scores.json
 * candidate: new
 * rules: ["live_stream_qa >= promoted - 0.5", "ifeval.prompt_strict >= base - 1.0"]
 * pointerRoot: s3://hat/                               # where checkpoints/promoted.json lives
 * ```
 */
export const gateInputSchema = z
  .object({
    /** The eval stage's manifest.json (or its scores.json). */
    scores: z.string().min(1),
    /** The label of the checkpoint to decide about. */
    candidate: z.string().min(1),
    /** Gate rules (queues/runs/run-gate.ts); all must hold to promote. */
    rules: z.array(z.string().min(1)).min(1),
    /** Write the promoted-checkpoint pointer on a promotion. Default true. */
    promote: z.boolean().default(true),
    /** Hold a candidate when more than this share of its items failed or timed out (0–1). Default 0.01. */
    maxErrorRate: z.number().min(0).max(1).default(0.01),
    /** Gate a candidate that is not a real model (local test server, random weights, simulation policy). Default false: hold it. */
    allowSimulated: z.boolean().default(false),
    /** The artifact root holding `checkpoints/promoted.json`. */
    pointerRoot: z.string().regex(/^(s3|file):\/\/.+/, 'must be an s3://bucket/prefix or file:///dir artifact root'),
    /**
     * Stages of the run that run only for a promoted candidate (a run's `gate.before`). On a hold
     * the gate job completes with the decision and these complete at once without running; runs
     * show the gate as held and them as not run, with the reasons. Default none.
     */
    holds: z.array(z.string().min(1)).default([]),
  })
  .strict();
export type GateInput = z.infer<typeof gateInputSchema>;

export const gateOutputSchema = z.object({
  manifestUri: z.string(),
  decisionUri: z.string(),
  decision: z.enum(['promote', 'hold']),
  candidate: z.string(),
  reasons: z.array(z.string()),
  /** True when the pointer now names the candidate. */
  promoted: z.boolean(),
  pointerUri: z.string().optional(),
  /** On a hold: the stages it keeps from running (the input's `holds`). */
  holds: z.array(z.string()).default([]),
  /** The candidate against the promoted checkpoint's stored results, item by item (run-gate.ts NightToNight). */
  nightToNight: z
    .object({
      promotedScoresUri: z.string().optional(),
      promotedRunId: z.string().optional(),
      promotedLabel: z.string().optional(),
      suites: z.array(
        z.object({
          suite: z.string(),
          difference: z.object({ score: z.number(), low: z.number(), high: z.number(), items: z.number() }),
        }),
      ),
      lost: z.number(),
      gained: z.number(),
      unavailable: z.string().optional(),
    })
    .optional(),
});
export type GateOutput = z.infer<typeof gateOutputSchema>;

export function summarizeGate(output: GateOutput): StageSummary {
  return {
    figures: [
      {
        label: 'gate decision',
        value: `${output.decision} ${output.candidate}`,
        tone: output.decision === 'promote' ? 'pass' : 'warn',
        detail: output.reasons.join('; '),
      },
      ...(output.promoted
        ? [
            {
              label: 'promoted checkpoint',
              value: output.candidate,
              detail: `what latestCheckpoint resolves to from the next run on (${output.pointerUri ?? ''})`,
            },
          ]
        : []),
      ...(output.nightToNight ? [nightToNightFigure(output.candidate, output.nightToNight)] : []),
    ],
    links: [{ label: 'gate decision', uri: output.decisionUri }],
  };
}

const signed = (value: number) => `${value >= 0 ? '+' : ''}${value.toFixed(1)}`;

/** The run report's line: tonight's candidate − the promoted checkpoint's stored results, per suite. */
function nightToNightFigure(
  candidate: string,
  night: NonNullable<GateOutput['nightToNight']>,
): StageSummary['figures'][number] {
  if (night.unavailable !== undefined)
    return { label: `${candidate} vs promoted (stored results)`, value: 'not compared', detail: night.unavailable };
  return {
    label: `${candidate} vs promoted (stored results)`,
    value:
      night.suites
        .map(
          ({ suite, difference }) =>
            `${suite} ${signed(difference.score)} [${signed(difference.low)}, ${signed(difference.high)}]`,
        )
        .join(' · ') || 'no item in common',
    ...(night.suites.some(({ difference }) => difference.high < 0) ? { tone: 'warn' as const } : {}),
    detail: `paired item by item with run ${night.promotedRunId ?? '?'} (${night.promotedLabel ?? '?'}); ${night.lost} items passed then and fail now, ${night.gained} the reverse`,
  };
}

export const gateContract: StageContract<GateInput, GateOutput> = {
  name: 'gate',
  description: 'Promotion gate: applies thresholds to eval scores and promotes or holds the candidate checkpoint',
  input: gateInputSchema,
  output: gateOutputSchema,
  summarize: summarizeGate,
  holdOf: (output) =>
    output.decision === 'hold'
      ? { subject: output.candidate, reasons: output.reasons, stages: output.holds }
      : undefined,
  // Reads one small JSON and writes two: nothing to retry beyond store faults.
  queue: { attempts: 3, backoffMs: 1000 },
};
