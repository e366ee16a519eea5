import { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { stagePrefix } from '../../shared/artifacts/artifact-layout';
import { errorCodeOf } from '../../shared/errors';
import { gateDecisionObject, gateStageName, type GateDecisionRecord } from '../../queues/runs/run-gate';
import type { StageOutcome } from './run-manifest';

/** How a run's promotion gate ended, as the run manifest and report show it. */
export const gateOutcomeSchema = z.object({
  decision: z.enum(['promote', 'hold']),
  candidate: z.string(),
  /** The failed rules' reasons on a hold; every rule's on a promotion. */
  reasons: z.array(z.string()),
  /** True when the promoted-checkpoint pointer now names the candidate. */
  promoted: z.boolean(),
  decisionUri: z.string(),
  /** Stages that did not run because the candidate was held. */
  skipped: z.array(z.string()),
});
export type GateOutcome = z.infer<typeof gateOutcomeSchema>;

/** The note on a stage the gate held back (the run processor writes it from the stage's `heldBy`). */
const heldByGate = `held by the ${gateStageName}: `;

/**
 * Reads the gate's decision (when the run has a gate that decided) and shows a hold as what it
 * is: a decision, not a failure. The gate stage is `held` (its figures say why) and the stages it
 * held back are `not-run` with the reasons; the run's status then depends on the other stages only.
 * A gate job that failed with `[GATE_HOLD]` (how gates of earlier versions ended a hold) reads the same.
 */
export async function applyGateOutcome(
  store: ArtifactStore,
  runId: string,
  stages: StageOutcome[],
): Promise<{ stages: StageOutcome[]; gate?: GateOutcome }> {
  const gateStage = stages.find((stage) => stage.name === gateStageName);
  if (!gateStage) return { stages };
  const key = `${stagePrefix(runId, gateStageName)}${gateDecisionObject}`;
  if (!(await store.head(key))) return { stages };
  const record = JSON.parse((await store.getBuffer(key)).toString('utf8')) as GateDecisionRecord;
  const decided =
    gateStage.status === 'completed' || (gateStage.status === 'failed' && errorCodeOf(gateStage.error) === 'GATE_HOLD');
  const held = record.decision === 'hold' && decided;
  const reasons = record.reasons.join('; ');
  const skipped = held
    ? stages
        .filter(
          (stage) =>
            stage.status === 'not-run' &&
            (stage.error?.startsWith(heldByGate) || stage.error?.includes(`stage ${gateStageName}`)),
        )
        .map((stage) => stage.name)
    : [];
  const updated = stages.map((stage): StageOutcome => {
    if (held && stage.name === gateStageName) {
      const { error: _error, ...rest } = stage;
      return {
        ...rest,
        status: 'held',
        note: `held ${record.candidate}: ${reasons}`,
        figures: [
          { label: 'gate decision', value: `hold ${record.candidate}`, tone: 'warn', detail: reasons },
          // The gate's other figures (night to night against the promoted checkpoint's results) stay.
          ...(rest.figures ?? []).filter((figure) => figure.label !== 'gate decision'),
        ],
        links: [{ label: 'gate decision', uri: store.uriOf(key) }],
      };
    }
    if (skipped.includes(stage.name)) return { ...stage, error: `${heldByGate}${reasons}` };
    return stage;
  });
  return {
    stages: updated,
    gate: {
      decision: record.decision,
      candidate: record.candidate,
      reasons: record.reasons,
      promoted: record.promoted,
      decisionUri: store.uriOf(key),
      skipped,
    },
  };
}

/** Whether a stage outcome is fine for the run: completed, held (a decision), or not run because the gate held the candidate. */
export function stageCountsAsDone(stage: StageOutcome, gate: GateOutcome | undefined): boolean {
  return stage.status === 'completed' || stage.status === 'held' || (gate?.skipped.includes(stage.name) ?? false);
}
