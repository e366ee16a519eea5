import type { Worker } from 'bullmq';
import type { Logger } from '../../shared/log/logger';
import { systemClock, type Clock } from '../../queues/stage-kit/define-stage';
import { enqueueRun } from '../../queues/runs/flows';
import { isRunCancelled } from '../../queues/bullmq/run-cancelled';
import type { QueueContext } from '../../queues/bullmq/queue-context';
import { runsQueueName } from '../../queues/stage-kit/stage-names';
import { summarizeStageOutput } from '../../queues/stage-kit/stage-summary';
import type { StoreCache } from '../../queues/bullmq/stage-runtime';
import { createQueueWorker, type QueueWorkerOptions } from '../../queues/bullmq/worker-factory';
import { createRunJobProcessor, type RunJobRuntime } from './processor';

/** The run processor's runtime over a queue context and a store cache. */
export function createRunJobRuntime(
  context: QueueContext,
  stores: StoreCache,
  logger: Logger,
  clock: Clock = systemClock,
): RunJobRuntime {
  return {
    env: context.env,
    logger,
    clock,
    storeFor: stores.storeFor,
    openObject: stores.openObject,
    jobDataLimit: context.env.HAT_JOB_DATA_LIMIT,
    getJob: async (queue, id) => (await context.queue(queue).getJob(id)) ?? undefined,
    enqueue: (plan) => enqueueRun(context, plan),
    async addFlows(flows) {
      if (flows.length > 0) await context.flowProducer.addBulk(flows);
    },
    isRunCancelled: (runId) => isRunCancelled(context, runId),
    summarize: summarizeStageOutput,
  };
}

/** The Worker of the `runs` queue (run parent jobs and scheduled kickoffs). */
export function createRunWorker(runtime: RunJobRuntime, options: QueueWorkerOptions): Worker {
  return createQueueWorker(runsQueueName, createRunJobProcessor(runtime), options);
}
