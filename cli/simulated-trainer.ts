import { resolve } from 'node:path';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { ensureDummyModel, type DummyModelOptions } from '../shared/models/onnx/ensure-dummy-model';
import type { QueueContext } from '../queues/bullmq/queue-context';
import { registerCheckpoint } from '../queues/runs/register-checkpoint';
import { startHandoffPoller } from './handoff-poller';

/**
 * The demo's SIMULATED TRAINER: no training happens. Whenever a handoff of the run asks for a
 * checkpoint, it makes a random-weight ONNX decoder re-seeded for that handoff (one shape for
 * every handoff, with the Qwen3 tokenizer, so distillation still shares the teacher's) and
 * registers its directory as the checkpoint, marked `simulated: true` and registered by
 * `simulated-trainer`; the run manifest, the run report and `hat runs show` label it so. The
 * stages after each handoff thus really run on a different model than before it, through the
 * same `hat checkpoint register` path a real trainer takes. With `serve`, each checkpoint is also
 * served (`hat serve` over its directory) and registered with its endpoint and model id, so the
 * stages after the handoff sample it over HTTP as they would a checkpoint a real trainer deployed.
 */

export interface SimulatedTrainerOptions {
  runId: string;
  /** Where the dummy models go (`.hat/models`). */
  modelCacheDir: string;
  storeFor(rootUri: string): ArtifactStore;
  /** Told about each checkpoint registered. */
  onRegistered?(event: {
    handoff: string;
    modelDir: string;
    endpoint?: string;
    model?: string;
    policyVersion?: number;
  }): void;
  /** Told about a tick that failed (it is tried again at the next interval). */
  onError?(error: Error): void;
  /** Shape of the simulated checkpoints (tokenizer and size); default simulatedModelShape. */
  shape?: Omit<DummyModelOptions, 'seed'>;
  /** Serves a checkpoint's model directory under `modelName`; returns the base URL (`http://host:port/v1`). */
  serve?(modelDir: string, modelName: string): Promise<string>;
  intervalMs?: number;
}

/**
 * The default shape of a simulated checkpoint: a tiny Qwen3-tokenizer decoder (a CPU prefills the
 * rl stage's ~5k-token harness prompt in well under a second with it).
 */
export const simulatedModelShape = { tokenizer: 'qwen3', layers: 1, hidden: 8, heads: 2, kvHeads: 1 } as const;

/** The seed of the dummy model a handoff gets: a new model per run, handoff and policy version. */
export function simulatedCheckpointSeed(runId: string, handoff: string, policyVersion?: number): string {
  return `simulated-training:${runId}:${handoff}:v${policyVersion ?? 1}`;
}

/** The model id a served simulated checkpoint gets: says it is simulated, and which handoff and version. */
export function simulatedModelName(handoff: string, policyVersion?: number): string {
  return `simulated-training-${handoff}${policyVersion !== undefined ? `-v${policyVersion}` : ''}`;
}

/** Starts answering the run's handoffs; `stop()` ends it (and waits for a registration under way). */
export function startSimulatedTrainer(
  context: QueueContext,
  options: SimulatedTrainerOptions,
): { stop(): Promise<void> } {
  const answered = new Set<string>();
  return startHandoffPoller(context, {
    runId: options.runId,
    intervalMs: options.intervalMs ?? 250,
    ...(options.onError ? { onError: options.onError } : {}),
    async answer(handoff) {
      if (answered.has(handoff.name)) return;
      const modelDir = ensureDummyModel(resolve(options.modelCacheDir), {
        ...(options.shape ?? simulatedModelShape),
        seed: simulatedCheckpointSeed(options.runId, handoff.name, handoff.policyVersion),
      });
      const model = simulatedModelName(handoff.name, handoff.policyVersion);
      const endpoint = options.serve ? await options.serve(modelDir, model) : undefined;
      await registerCheckpoint(context, {
        runId: options.runId,
        handoff: handoff.name,
        modelDir,
        ...(endpoint !== undefined ? { endpoint, model } : {}),
        simulated: true,
        registeredBy: 'simulated-trainer',
        checkEndpoint: endpoint !== undefined,
        environment: process.env,
        storeFor: options.storeFor,
        now: new Date(),
      });
      answered.add(handoff.name);
      options.onRegistered?.({
        handoff: handoff.name,
        modelDir,
        ...(endpoint !== undefined ? { endpoint, model } : {}),
        ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}),
      });
    },
  });
}
