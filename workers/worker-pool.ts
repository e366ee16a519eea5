import type { Worker } from 'bullmq';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import type { HatEnv } from '../shared/config/env';
import { readManifest } from '../shared/artifacts/manifest';
import { BadInputError } from '../shared/errors';
import { createLogger, type Logger } from '../shared/log/logger';
import { declaresCounters } from '../shared/metrics/prometheus-stage-counters';
import {
  createWorkerMetrics,
  queueDepthStates,
  type WorkerMetrics,
  type WorkerMetricsOptions,
} from '../shared/metrics/prometheus-worker-metrics';
import { systemClock, type Clock, type StageServices } from '../queues/stage-kit/define-stage';
import { openQueueContext, type QueueContext } from '../queues/bullmq/queue-context';
import { runsQueueName } from '../queues/stage-kit/stage-names';
import { closeRedisConnection, createRedisConnection } from '../queues/bullmq/redis-connection';
import { findStage, listStages, stageNames } from '../queues/stage-kit/stage-registry';
import { createStageJobRuntime, createStoreCache, type StoreCache } from '../queues/bullmq/stage-runtime';
import { closeWorkersWithin, createStageWorker } from '../queues/bullmq/worker-factory';
import { createRunJobRuntime, createRunWorker } from './run/worker';
import { registerCatalogStages } from './stage-catalog';
import { compiledEntryFile } from '../shared/config/compiled-entry';
import { cpuBudget } from '../shared/config/cpu-budget';

/** Jobs at once per queue of stages that are not CPU-bound, when nothing else says. */
const defaultConcurrency = 4;

/**
 * Where the compiled sandbox entry (workers/stage-sandbox.ts) lives: beside this file when running
 * compiled code, else in `dist/` (sources run by jest). Undefined when it has not been built.
 */
export function sandboxEntryFile(): string | undefined {
  return compiledEntryFile('workers/stage-sandbox');
}

/** Workers for some or all queues in one process: what `hat worker` and `hat demo` run. */
export interface WorkerPoolOptions {
  env: HatEnv;
  /** Stage names and/or `runs`. Default: every registered stage and `runs`. */
  queues?: string[];
  /** Jobs at once per queue; default each stage's own, else HAT_WORKER_CONCURRENCY, else the cores for CPU-bound stages and 4 for others. */
  concurrency?: number;
  logger?: Logger;
  clock?: Clock;
  services?: StageServices;
  /** See StageWorkerOptions.sandbox. Default `auto`. */
  sandbox?: 'auto' | 'off';
  /** Opens the store of an artifact root (tests inject one); default by URI scheme. */
  openStore?: (rootUri: string) => ArtifactStore;
  /** Overrides every stage's lock duration, ms. Default HAT_LOCK_DURATION_MS, else each stage's own. */
  lockDurationMs?: number;
  /** How often workers look for stalled jobs, ms. Default HAT_STALLED_INTERVAL_MS, else 30000. */
  stalledIntervalMs?: number;
  /** Collects Prometheus metrics (`pool.metrics`; `hat worker --metrics-port` serves them). Default off. */
  metrics?: Pick<WorkerMetricsOptions, 'depthCacheMs' | 'processMetrics'>;
}

export interface WorkerPool {
  /** Queues served, in start order. */
  readonly queues: string[];
  /** Stages whose jobs run in sandboxed worker threads. */
  readonly sandboxed: string[];
  readonly workers: Worker[];
  readonly context: QueueContext;
  /** The pool's Prometheus metrics, when `metrics` was given. */
  readonly metrics?: WorkerMetrics;
  /** Resolves when every worker is connected and fetching. */
  waitUntilReady(): Promise<void>;
  /** Graceful close bounded by `timeoutMs` (default HAT_SHUTDOWN_TIMEOUT_MS); see closeWorkersWithin. */
  close(timeoutMs?: number): Promise<{ forced: boolean }>;
}

export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  registerCatalogStages();
  const { env } = options;
  const queues = options.queues ?? [...stageNames(), runsQueueName];
  const unknown = queues.filter((name) => name !== runsQueueName && !findStage(name));
  if (unknown.length > 0) {
    throw new BadInputError(
      'UNKNOWN_STAGE',
      `--stages names unknown stage(s) ${unknown.join(', ')}; known: ${[...stageNames(), runsQueueName].join(', ')}`,
    );
  }
  const logger = options.logger ?? createLogger({ level: env.HAT_LOG_LEVEL });
  const clock = options.clock ?? systemClock;
  const connection = createRedisConnection(env, 'worker', { connectionName: 'hat-worker' });
  let context: QueueContext;
  try {
    context = await openQueueContext(env, { connection });
  } catch (error) {
    connection.disconnect();
    throw error;
  }
  const stores = createStoreCache(env, options.openStore, logger);
  const stageRuntime = createStageJobRuntime({ context, stores, logger, clock, services: options.services });
  const metrics = options.metrics ? createPoolMetrics(queues, context, stores, logger, options.metrics) : undefined;
  const workers: Worker[] = [];
  const sandboxed: string[] = [];
  for (const name of queues) {
    const common = {
      connection,
      prefix: context.prefix,
      logger,
      lockDurationMs: options.lockDurationMs ?? env.HAT_LOCK_DURATION_MS,
      stalledIntervalMs: options.stalledIntervalMs ?? env.HAT_STALLED_INTERVAL_MS,
      observer: metrics,
    };
    if (name === runsQueueName) {
      workers.push(
        createRunWorker(createRunJobRuntime(context, stores, logger, clock), {
          ...common,
          concurrency: options.concurrency ?? 4,
        }),
      );
      continue;
    }
    const stage = listStages().find((item) => item.name === name);
    if (!stage) continue;
    const concurrency =
      options.concurrency ??
      stage.queue?.concurrency ??
      env.HAT_WORKER_CONCURRENCY ??
      (stage.queue?.cpuHeavy ? cpuBudget() : defaultConcurrency);
    const created = createStageWorker(stage, stageRuntime, {
      ...common,
      concurrency,
      env,
      sandbox: options.sandbox,
      sandboxEntry: sandboxEntryFile(),
    });
    workers.push(created.worker);
    if (created.sandboxed) sandboxed.push(name);
  }
  let closing: Promise<{ forced: boolean }> | undefined;
  return {
    queues,
    sandboxed,
    workers,
    context,
    metrics,
    async waitUntilReady() {
      await Promise.all(workers.map((worker) => worker.waitUntilReady()));
    },
    close(timeoutMs = env.HAT_SHUTDOWN_TIMEOUT_MS) {
      closing ??= (async () => {
        const result = await closeWorkersWithin(workers, timeoutMs, logger);
        if (result.forced) {
          // Whatever still hangs on Redis must not keep this process alive.
          connection.disconnect();
        } else {
          await context.close();
          await closeRedisConnection(connection);
        }
        await stores.close();
        return result;
      })();
      return closing;
    },
  };
}

/** Metrics over the served queues; stage counters read manifests through the pool's stores. */
function createPoolMetrics(
  queues: string[],
  context: QueueContext,
  stores: StoreCache,
  logger: Logger,
  settings: NonNullable<WorkerPoolOptions['metrics']>,
): WorkerMetrics {
  return createWorkerMetrics({
    ...settings,
    queues,
    logger,
    jobCounts: (queue) => context.queue(queue).getJobCounts(...queueDepthStates),
    readManifestStats: async (uri) => {
      const { store, key } = stores.openObject(uri);
      return (await readManifest(store, key)).stats;
    },
    partCountersDeclared: (stage) => {
      const definition = findStage(stage);
      return (
        definition?.kind === 'fan-out' &&
        (definition.partCounters !== undefined || declaresCounters(definition.partOutput))
      );
    },
    partCounters: (stage, output) => {
      const definition = findStage(stage);
      // The output was checked against the part schema when the part finished; one the contract
      // cannot read (another code version) throws, and the metrics skip it.
      return definition?.kind === 'fan-out' ? definition.partCounters?.(output) : undefined;
    },
  });
}
