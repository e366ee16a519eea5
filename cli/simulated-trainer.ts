import { resolve } from 'node:path';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { ensureDummyModel } from '../shared/models/onnx/ensure-dummy-model';
import type { QueueContext } from '../queues/bullmq/queue-context';
import { registerCheckpoint } from '../queues/runs/register-checkpoint';
import { getRunStatus } from '../queues/runs/run-control';

/**
 * The demo's SIMULATED TRAINER: no training happens. Whenever a handoff of the run asks for a
 * checkpoint, it makes a random-weight ONNX decoder re-seeded for that handoff (same shape and
 * tokenizer as the demo's student, so distillation still shares the teacher's tokenizer) and
 * registers its directory as the checkpoint, marked `simulated: true` and registered by
 * `simulated-trainer`; the run manifest, the run report and `hat runs show` label it so. The
 * stages after each handoff thus really run on a different model than before it, through the
 * same `hat checkpoint register` path a real trainer takes.
 */

export interface SimulatedTrainerOptions {
  runId: string;
  /** Where the dummy models go (`.hat/models`). */
  modelCacheDir: string;
  storeFor(rootUri: string): ArtifactStore;
  /** Told about each checkpoint registered. */
  onRegistered?(event: { handoff: string; modelDir: string; policyVersion?: number }): void;
  intervalMs?: number;
}

/** The shape of every simulated checkpoint: the demo student's (examples/demo-run.yaml). */
export const simulatedModelShape = { tokenizer: 'qwen3', layers: 2, hidden: 64, heads: 4, kvHeads: 2 } as const;

/** The seed of the dummy model a handoff gets: a new model per run, handoff and policy version. */
export function simulatedCheckpointSeed(runId: string, handoff: string, policyVersion?: number): string {
  return `simulated-training:${runId}:${handoff}:v${policyVersion ?? 1}`;
}

/** Starts answering the run's handoffs; `stop()` ends it (and waits for a registration under way). */
export function startSimulatedTrainer(context: QueueContext, options: SimulatedTrainerOptions): { stop(): Promise<void> } {
  const answered = new Set<string>();
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const tick = async () => {
    const status = await getRunStatus(context, options.runId);
    for (const handoff of status.handoffs ?? []) {
      if (handoff.state !== 'waiting-for-checkpoint' || answered.has(handoff.name)) continue;
      const modelDir = ensureDummyModel(resolve(options.modelCacheDir), { ...simulatedModelShape, seed: simulatedCheckpointSeed(options.runId, handoff.name, handoff.policyVersion) });
      await registerCheckpoint(context, {
        runId: options.runId,
        handoff: handoff.name,
        modelDir,
        simulated: true,
        registeredBy: 'simulated-trainer',
        checkEndpoint: false,
        environment: process.env,
        storeFor: options.storeFor,
        now: new Date(),
      });
      answered.add(handoff.name);
      options.onRegistered?.({ handoff: handoff.name, modelDir, ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}) });
    }
  };
  const timer = setInterval(() => {
    if (stopped) return;
    // One tick at a time; a failed tick (Redis hiccup) is tried again at the next interval.
    running = running.then(tick).catch(() => undefined);
  }, options.intervalMs ?? 250);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
