import { join, resolve } from 'node:path';
import type { HatEnv } from '../shared/config/env';
import { startServeServer, type ServeServer } from '../serve/serve-server';
import type { QueueContext } from '../queues/bullmq/queue-context';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import type { TrainerExecutor } from '../queues/runs/run-handoff';
import { startCommandTrainer, type CommandTrainerEvent } from './command-trainer';

/**
 * The `command` executor as the CLI runs it (`hat demo`, `hat run --wait`, `hat train`): the
 * pipeline's trainer answers the run's handoffs from this process, each checkpoint is served by
 * `hat serve` in this process (so stages that name `${checkpoints.<handoff>.endpoint}` sample it
 * over HTTP, as they would a deployed checkpoint) and progress goes to `log`.
 */
export interface TrainerSessionOptions {
  runId: string;
  env: HatEnv;
  /** Environment of the trainer process (default this process's). */
  environment?: NodeJS.ProcessEnv;
  /** Which handoffs to answer (default those with `trainer.executor: command`). */
  executors?: TrainerExecutor[] | 'all';
  /** Serve each checkpoint in this process (default true). */
  serve?: boolean;
  /** Where trained checkpoints go (default `.hat/trained`). */
  workDir?: string;
  log(line: string): void;
}

export function startTrainerSession(queues: QueueContext, options: TrainerSessionOptions): { stop(): Promise<void> } {
  const stores = createStoreCache(options.env);
  const servers: ServeServer[] = [];
  const lastLogged = new Map<string, number>();
  const log = options.log;
  const onEvent = (event: CommandTrainerEvent) => {
    if (event.kind === 'started')
      log(
        `training handoff ${event.handoff}${event.base ? ` from ${event.base}` : ' from a new model'} -> ${event.outDir}`,
      );
    else if (event.kind === 'progress') {
      // A line every 5 s per handoff: enough to see it move without burying the stage progress.
      const now = Date.now();
      if (now - (lastLogged.get(event.handoff) ?? 0) < 5_000) return;
      lastLogged.set(event.handoff, now);
      log(
        `  ${event.handoff}: step ${event.step}, loss ${event.loss.toFixed(4)}${event.tokensPerSecond !== undefined ? `, ${event.tokensPerSecond.toFixed(0)} tokens/s` : ''}`,
      );
    } else if (event.kind === 'registered') {
      const result = event.result;
      log(
        `trained handoff ${event.handoff}: ${result.objective}, ${result.steps} steps, final loss ${result.finalLoss?.toFixed(4) ?? 'n/a'}` +
          `${result.titoProof ? `, token-in-token-out max |diff| ${result.titoProof.maxAbsDiff.toExponential(2)}` : ''}` +
          `${result.reverseKl ? `, reverse KL (k1 estimate on the rollout tokens, can be negative) ${result.reverseKl.before.toFixed(4)} -> ${result.reverseKl.after.toFixed(4)}` : ''}` +
          `${result.advantages ? `, ${result.advantages.nonZero} of ${result.advantages.records} records with a non-zero advantage${result.advantages.nonZero === 0 ? ' (equal rewards in every group: nothing to learn)' : ''}` : ''}` +
          `${result.onnx ? `, ONNX vs PyTorch max |logit diff| ${result.onnx.maxAbsLogitDiff.toExponential(2)}` : ''}` +
          ` -> ${event.model ?? result.onnxDir}${event.endpoint ? ` served at ${event.endpoint}` : ''}`,
      );
    } else {
      log(
        `training handoff ${event.handoff} FAILED (exit ${event.exitCode}):\n  ${event.lastLines.slice(-6).join('\n  ')}`,
      );
    }
  };
  const trainer = startCommandTrainer(queues, {
    runId: options.runId,
    workDir: resolve(options.workDir ?? join('.hat', 'trained')),
    storeFor: stores.storeFor,
    environment: options.environment ?? process.env,
    ...(options.executors ? { executors: options.executors } : {}),
    ...(options.serve === false
      ? {}
      : {
          async serve(modelDir: string, modelName: string) {
            const served = await startServeServer({ model: modelDir, servedModelName: modelName });
            servers.push(served);
            return served.baseUrl;
          },
        }),
    onEvent,
    onError: (error) => log(`trainer: ${error.message} (trying again)`),
  });
  return {
    async stop() {
      await trainer.stop();
      await Promise.allSettled(servers.map((server) => server.close()));
      await stores.close();
    },
  };
}
