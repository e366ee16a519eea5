/**
 * Entry file of BullMQ sandboxed processors (worker threads) for CPU-heavy stages; BullMQ loads
 * the compiled `dist/workers/stage-sandbox.js`. A thread shares no objects with the worker that
 * started it, so it rebuilds the runtime (Redis connection, stores, registered stages) from the
 * environment passed as workerData, once per thread, and then runs the same binding as an
 * in-process worker. The worker's main event loop only renews locks and talks to Redis.
 */
import { workerData } from 'node:worker_threads';
import { createLogger } from '../shared/log/logger';
import { registerCatalogStages } from './stage-catalog';
import { openQueueContext } from '../queues/bullmq/queue-context';
import {
  createStageJobProcessor,
  type StageJobHandle,
  type StageJobProcessor,
  type StageJobRuntime,
} from '../queues/bullmq/stage-job-processor';
import { getStage } from '../queues/stage-kit/stage-registry';
import { createStageJobRuntime, createStoreCache } from '../queues/bullmq/stage-runtime';
import type { SandboxWorkerData } from '../queues/bullmq/worker-factory';

registerCatalogStages();

let sharedRuntime: Promise<StageJobRuntime> | undefined;
/** One processor per stage and thread: it keeps state across jobs (storage outages). */
const processors = new Map<string, StageJobProcessor>();

function sandboxRuntime(): Promise<StageJobRuntime> {
  sharedRuntime ??= (async () => {
    const { env } = (workerData as SandboxWorkerData).hatSandbox;
    const context = await openQueueContext(env, { role: 'worker', connectionName: 'hat-sandbox' });
    const logger = createLogger({ level: env.HAT_LOG_LEVEL, bindings: { sandbox: true } });
    return createStageJobRuntime({ context, stores: createStoreCache(env, undefined, logger), logger });
  })();
  return sharedRuntime;
}

let activeJobs = 0;
let idleTimer: NodeJS.Timeout | undefined;

/**
 * Ends this thread once it has had no job for HAT_SANDBOX_IDLE_MS. BullMQ keeps sandbox threads
 * for the worker's life; a thread holds its stage's tokenizer, caches and heap (several hundred
 * MB), so a worker serving collect, augment and shard held every stage's threads at once and its
 * memory was the sum of theirs. BullMQ drops a thread that exits from its pool and starts a new
 * one for the next job. (Should a job be handed to the thread in the instant it exits, that job
 * fails one attempt with "Unexpected exit code: 0" and is retried.)
 */
function scheduleIdleExit(): void {
  const { env } = (workerData as SandboxWorkerData).hatSandbox;
  if (env.HAT_SANDBOX_IDLE_MS === 0 || activeJobs > 0) return;
  idleTimer = setTimeout(() => {
    if (activeJobs > 0) return;
    void sharedRuntime
      ?.then((runtime) =>
        runtime.logger.info(
          { idleMs: env.HAT_SANDBOX_IDLE_MS },
          'sandbox thread idle: it ends and hands its memory back; the next job starts a new one',
        ),
      )
      .catch(() => undefined)
      .finally(() => {
        if (activeJobs === 0) process.exit(0);
      });
  }, env.HAT_SANDBOX_IDLE_MS);
}

export default async function processSandboxedJob(
  job: StageJobHandle,
  token?: string,
  signal?: AbortSignal,
): Promise<unknown> {
  clearTimeout(idleTimer);
  activeJobs++;
  try {
    return await runSandboxedJob(job, token, signal);
  } finally {
    activeJobs--;
    scheduleIdleExit();
  }
}

async function runSandboxedJob(job: StageJobHandle, token?: string, signal?: AbortSignal): Promise<unknown> {
  const runtime = await sandboxRuntime();
  // The kind when the run names the stage differently (`sft_data: { stage: shard }`), else the name.
  const data = job.data as { stage?: unknown; kind?: unknown };
  const stageName = typeof data.kind === 'string' ? data.kind : data.stage;
  const stage = getStage(typeof stageName === 'string' ? stageName : '');
  let processor = processors.get(stage.name);
  if (!processor) {
    const { lockDurationMs } = (workerData as SandboxWorkerData).hatSandbox;
    processor = createStageJobProcessor(stage, runtime, { lockDurationMs });
    processors.set(stage.name, processor);
  }
  return processor(job, token, signal);
}
