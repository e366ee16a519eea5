/**
 * gate stage. Input: an eval manifest (or its scores.json), the candidate label, the rules, the
 * artifact root of the promoted-checkpoint pointer. Reads every model's metrics, applies the
 * rules (queues/runs/run-gate.ts), writes `decision.json` (decision, each rule's values and reason,
 * the pointer before), moves the pointer on a promotion (history first, pointer last), then
 * `manifest.json`. A hold is a decision, not a failure: the job completes with it, and the stages
 * it `holds` (a run's `gate.before`) complete at once without running (contract `holdOf`).
 * Idempotent: a retried gate decides the same from the same scores and rewrites its own objects
 * and its own history entry.
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { pointerLocationOf, readPromotedCheckpoint, writePromotion } from '../../queues/runs/promoted-checkpoint';
import {
  evaluateGate,
  gateDecisionObject,
  GATE_DECISION_SCHEMA_VERSION,
  type GateDecisionRecord,
  type NightToNight,
  type PairedComparison,
} from '../../queues/runs/run-gate';
import type { PromotedCheckpoint } from '../../queues/runs/promoted-checkpoint';
import { compareScores, parsePairableScores } from '../../shared/eval/item-outcomes';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { readManifest, manifestObjectOf } from '../../shared/artifacts/manifest';
import { BadInputError } from '../../shared/errors';
import { hashValue, sha256Hex } from '../../shared/hash/hash';
import { endpointReference } from '../../shared/models/model-endpoint';
import { modelEndpointOf } from '../../shared/models/model-registry';
import { gateContract, type GateInput, type GateOutput } from './gate-contract';

interface ScoresFile {
  models: Array<{ label: string; config: Record<string, unknown>; simulated?: boolean; simulatedReason?: string }>;
  scores: Record<string, { metrics: Record<string, number>; modelErrors?: number; evaluated?: number }>;
  comparisons?: PairedComparison[];
}

async function readScores(uri: string, deps: StageDeps): Promise<{ scores: ScoresFile; uri: string; sha256: string }> {
  const { store, key } = deps.openObject(uri);
  if (!(await store.head(key)))
    throw new BadInputError('MISSING_INPUT', `scores: ${uri} does not exist; run the eval stage first or fix the URI`);
  let scoresUri = uri;
  let scoresKey = key;
  let scoresStore = store;
  if (key.endsWith('manifest.json')) {
    const manifest = await readManifest(store, key);
    const object = manifest.objects.find((entry) => entry.kind === 'scores');
    if (manifest.stage !== 'eval' || !object)
      throw new BadInputError(
        'GATE_BAD_SCORES',
        `scores: ${uri} is a ${manifest.stage} manifest without scores; give the eval stage's manifest.json`,
      );
    ({ store: scoresStore, key: scoresKey } = deps.openObject(object.uri));
    scoresUri = object.uri;
  }
  const bytes = await scoresStore.getBuffer(scoresKey);
  const scores = JSON.parse(bytes.toString('utf8')) as ScoresFile;
  if (!scores.scores || !Array.isArray(scores.models))
    throw new BadInputError(
      'GATE_BAD_SCORES',
      `scores: ${scoresUri} is not an eval scores.json (no models/scores); give the eval stage's manifest.json`,
    );
  return { scores, uri: scoresUri, sha256: sha256Hex(bytes) };
}

/**
 * How the pointer names a model, as its adapter describes its endpoint: base URL and model id
 * (in-process adapters: `<adapter>:<directory or policy>`). An adapter this process does not know
 * is named by its name alone.
 */
function checkpointOf(config: Record<string, unknown>): { endpoint: string; model: string } {
  const adapter = String(config.adapter ?? 'unknown');
  const endpoint = modelEndpointOf(config);
  return endpoint ? endpointReference(endpoint) : { endpoint: `${adapter}:`, model: adapter };
}

/**
 * Tonight's candidate paired item by item with the stored results the promoted checkpoint was
 * promoted on (the pointer's scoresUri and label). Undefined when the pointer names no scores (a
 * checkpoint promoted by hand); never fails the gate: a comparison that cannot be made says why.
 */
async function compareWithPromoted(
  previous: PromotedCheckpoint | undefined,
  tonight: ScoresFile,
  candidate: string,
  tonightUri: string,
  deps: StageDeps,
): Promise<NightToNight | undefined> {
  if (!previous?.scoresUri || !previous.label) return undefined;
  // The promoted checkpoint was judged on these very scores (a retried gate after its own promotion).
  if (previous.scoresUri === tonightUri) return undefined;
  const base = { promotedScoresUri: previous.scoresUri, promotedLabel: previous.label, suites: [], lost: 0, gained: 0 };
  try {
    const { store, key } = deps.openObject(previous.scoresUri);
    const stored = parsePairableScores(JSON.parse((await store.getBuffer(key)).toString('utf8')), previous.scoresUri);
    const comparison = compareScores(
      { scores: stored, name: previous.scoresUri, label: previous.label },
      { scores: parsePairableScores(tonight, tonightUri), name: tonightUri, label: candidate },
      { samples: 1000, seed: `${deps.run.seed}/night-to-night` },
    );
    return {
      ...base,
      promotedRunId: stored.runId,
      suites: comparison.suites.map(({ suite, difference }) => ({ suite, difference })),
      lost: comparison.lost.length,
      gained: comparison.gained.length,
    };
  } catch (error) {
    return { ...base, unavailable: error instanceof Error ? error.message : String(error) };
  }
}

export function createGateProcessor(deps: StageDeps) {
  return async (input: GateInput): Promise<GateOutput> => {
    const { scores, uri: scoresUri, sha256 } = await readScores(input.scores, deps);
    const model = scores.models.find((entry) => entry.label === input.candidate);
    if (!model)
      throw new BadInputError(
        'GATE_UNKNOWN_CANDIDATE',
        `candidate: "${input.candidate}" is not a model of ${scoresUri} (labels: ${scores.models.map((entry) => entry.label).join(', ')}); name an evaluated label`,
      );
    const metrics = Object.fromEntries(Object.entries(scores.scores).map(([label, entry]) => [label, entry.metrics]));
    const own = scores.scores[input.candidate];
    const decision = evaluateGate(input.rules, input.candidate, metrics, {
      comparisons: scores.comparisons ?? [],
      ...(own?.evaluated !== undefined ? { errors: { failed: own.modelErrors ?? 0, items: own.evaluated } } : {}),
      ...(model.simulated ? { simulated: model.simulatedReason ?? 'simulated or random-weight model' } : {}),
      maxErrorRate: input.maxErrorRate,
      allowSimulated: input.allowSimulated,
    });
    const pointerStore = pointerLocationOf(input.pointerRoot, deps.openObject);
    const previous = await readPromotedCheckpoint(pointerStore);
    const nightToNight = await compareWithPromoted(previous, scores, input.candidate, scoresUri, deps);
    const checkpoint = checkpointOf(model.config);
    const promote = decision.decision === 'promote' && input.promote;
    let pointerUri: string | undefined;
    if (promote) {
      ({ pointerUri } = await writePromotion(pointerStore, {
        schemaVersion: 1,
        ...checkpoint,
        label: input.candidate,
        runId: deps.run.id,
        promotedBy: 'gate',
        promotedAt: new Date(deps.clock.now()).toISOString(),
        reasons: decision.reasons,
        metrics: metrics[input.candidate] ?? {},
        scoresUri,
      }));
    }
    const record: GateDecisionRecord = {
      schemaVersion: GATE_DECISION_SCHEMA_VERSION,
      runId: deps.run.id,
      scoresUri,
      ...decision,
      checkpoint,
      ...(previous
        ? {
            previous: {
              endpoint: previous.endpoint,
              model: previous.model,
              ...(previous.runId ? { runId: previous.runId } : {}),
              promotedAt: previous.promotedAt,
            },
          }
        : {}),
      promoted: promote,
      ...(pointerUri ? { pointerUri } : {}),
      ...(nightToNight ? { nightToNight } : {}),
    };
    const decisionInfo = await deps.store.put(
      deps.output.key(gateDecisionObject),
      `${JSON.stringify(record, null, 2)}\n`,
      { contentType: 'application/json' },
    );
    const { info } = await writeStageManifest(deps, {
      objects: [
        manifestObjectOf(decisionInfo, {
          schemaVersion: GATE_DECISION_SCHEMA_VERSION,
          format: 'json',
          kind: 'decision',
        }),
      ],
      lineage: { inputs: [{ uri: scoresUri, sha256 }], configHash: hashValue(input) },
      stats: { decision: decision.decision, candidate: input.candidate, reasons: decision.reasons },
    });
    deps.logger.info(
      { decision: decision.decision, candidate: input.candidate, reasons: decision.reasons },
      'gate decided',
    );
    return {
      manifestUri: info.uri,
      decisionUri: decisionInfo.uri,
      decision: decision.decision,
      candidate: input.candidate,
      reasons: decision.reasons,
      promoted: promote,
      ...(pointerUri ? { pointerUri } : {}),
      holds: decision.decision === 'hold' ? input.holds : [],
      ...(nightToNight ? { nightToNight } : {}),
    };
  };
}

export const gateStage = defineStage({ ...gateContract, createProcessor: createGateProcessor });
