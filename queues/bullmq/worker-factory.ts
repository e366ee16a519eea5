import { Worker, type Job, type Processor, type WorkerOptions } from 'bullmq';
import type { HatEnv } from '../../shared/config/env';
import { errorCodeOf } from '../../shared/errors';
import type { Logger } from '../../shared/log/logger';
import type { AnyStage } from '../stage-kit/define-stage';
import { partIdOfJobId } from '../stage-kit/job-ids';
import { hatBackoffStrategy } from './job-options';
import { isRedisConnectionError, type RedisClient } from './redis-connection';
import { JobCancels } from './job-cancels';
import { redisFullError } from './redis-full';
import { uniqueWorkerName } from './stalled-jobs';
import { defaultLockDurationMs, lockLostReason } from './job-lock';
import { createInProcessStageJobProcessor, jobLogIds, type StageJobRuntime } from './stage-job-processor';

export { defaultLockDurationMs } from './job-lock';

/** Hears how jobs end (metrics); a WorkerMetrics satisfies it. */
export interface JobObserver {
  jobCompleted(queue: string, job: Job, result: unknown): void;
  /** `final`: no retry follows. */
  jobFailed(queue: string, job: Job, error: Error, final: boolean): void;
}

/**
 * The job a worker lost the lock of: BullMQ's `could not renew lock for job <id>` (the renewal
 * found another owner or none), `Missing lock for job <id>. <command>` (finishing a job the
 * stalled checker handed to another worker, which finished it) and `Lock mismatch for job <id>.
 * Cmd <command> from <state>` (finishing it while the other worker still runs it), all seen
 * after a worker was paused (a stopped container, a long GC, a suspended VM) for longer than its
 * lock.
 */
export function lostLockJobId(error: Error): string | undefined {
  return /^(?:Missing lock for job (.+)\. \w+$|Lock mismatch for job (.+)\. Cmd \w+ from \S+$|could not renew lock for job (.+)$)/
    .exec(error.message)
    ?.slice(1)
    .find(Boolean);
}

/** The one line a worker writes for a job it lost the lock of (see lostLockJobId). */
export function lostLockMessage(queue: string, jobId: string, cause: string): string {
  const part = partIdOfJobId(jobId);
  return (
    `${part ? `${part} (job ${jobId})` : `job ${jobId}`} of ${queue} was handed to another worker while this one was paused past its lock (${cause}); ` +
    'nothing was lost: the other worker runs it, and this worker stopped it without writing its outputs'
  );
}

/** One line per job whose lock was lost: a resumed worker reports each of them several times. */
class LostLocks {
  private readonly seen = new Set<string>();
  first(jobId: string): boolean {
    if (this.seen.has(jobId)) return false;
    // Bounded: a long-lived worker must not keep every id it ever lost.
    if (this.seen.size >= 1_000) this.seen.clear();
    this.seen.add(jobId);
    return true;
  }
}

/**
 * One line when Redis stops answering and one when it answers again, per connection (every
 * Worker of a process shares one): BullMQ reports each failed reconnect of each of its
 * connections as an error, dozens a second, which read like a crash and hide the one fact.
 */
class RedisOutages {
  private static readonly byConnection = new WeakMap<RedisClient, RedisOutages>();
  private down = false;

  static of(connection: RedisClient, logger: Logger): RedisOutages {
    let outages = RedisOutages.byConnection.get(connection);
    if (!outages) {
      outages = new RedisOutages(logger);
      RedisOutages.byConnection.set(connection, outages);
      const found = outages;
      connection.on('ready', () => found.answered());
    }
    return outages;
  }

  private constructor(private readonly logger: Logger) {}

  /** Logs the first error of an outage; the rest say nothing new. */
  failed(error: { message: string }): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn(
      { cause: error.message },
      `Redis does not answer (${error.message}); the worker keeps reconnecting and carries on when it answers: jobs stay in Redis, and a part whose lock lapses meanwhile is handed back by the stall check`,
    );
  }

  private answered(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.info('Redis answers again; the worker carries on');
  }
}

/** Settings of one BullMQ Worker. */
export interface QueueWorkerOptions {
  connection: RedisClient;
  prefix: string;
  concurrency: number;
  lockDurationMs?: number;
  /** How often the worker looks for stalled jobs (lock lapsed: a killed process), ms. Default BullMQ's 30000. */
  stalledIntervalMs?: number;
  logger: Logger;
  observer?: JobObserver;
}

/** The ids a job's log lines carry (see jobLogIds), and the queue. */
export function jobLogBindings(queue: string, job: Job): Record<string, unknown> {
  return { queue, ...jobLogIds(job) };
}

/**
 * A BullMQ Worker whose in-process processor cancels its jobs through a JobCancels registry
 * instead of BullMQ's per-job AbortControllers: `cancelJob` and `cancelAllJobs` reach both.
 */
class CancellableWorker extends Worker {
  constructor(
    name: string,
    processor: Processor,
    options: WorkerOptions,
    private readonly cancels: JobCancels,
  ) {
    super(name, processor, options);
  }

  override cancelJob(jobId: string, reason?: string): boolean {
    const here = this.cancels.cancel(jobId, reason);
    return super.cancelJob(jobId, reason) || here;
  }

  override cancelAllJobs(reason?: string): void {
    this.cancels.cancelAll(reason);
    super.cancelAllJobs(reason);
  }
}

/**
 * A BullMQ Worker with the project's settings: our backoff strategy and error logging. The
 * connection must be a worker connection (`maxRetriesPerRequest: null`); BullMQ duplicates it
 * for its blocking reads. With `cancels`, the processor's jobs are cancelled through it.
 */
export function createQueueWorker(
  queueName: string,
  processor: Processor | string,
  options: QueueWorkerOptions & { sandboxed?: boolean; workerData?: unknown; cancels?: JobCancels },
): Worker {
  const settings: WorkerOptions = {
    // Stored on every job it takes, and the name of its connection: `hat runs show` tells a part
    // whose worker is gone (stalled-jobs.ts).
    name: uniqueWorkerName(),
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs ?? defaultLockDurationMs,
    ...(options.stalledIntervalMs !== undefined ? { stalledInterval: options.stalledIntervalMs } : {}),
    settings: { backoffStrategy: hatBackoffStrategy },
    ...(options.sandboxed ? { useWorkerThreads: true, workerThreadsOptions: { workerData: options.workerData } } : {}),
  };
  const worker =
    options.cancels && typeof processor !== 'string'
      ? new CancellableWorker(queueName, processor, settings, options.cancels)
      : new Worker(queueName, processor, settings);
  const { logger, observer } = options;
  const lostLocks = new LostLocks();
  const outages = RedisOutages.of(options.connection, logger);
  // The job is another worker's now: stop it here (its writes are refused too, see job-lock.ts).
  worker.on('lockRenewalFailed', (jobIds: string[]) => {
    for (const jobId of jobIds) worker.cancelJob(jobId, lockLostReason);
  });
  worker.on('error', (error) => {
    const lostJobId = lostLockJobId(error);
    if (lostJobId !== undefined) {
      if (lostLocks.first(lostJobId)) {
        const part = partIdOfJobId(lostJobId);
        logger.warn(
          { queue: queueName, jobId: lostJobId, ...(part ? { part } : {}), cause: error.message },
          lostLockMessage(queueName, lostJobId, error.message),
        );
      }
      return;
    }
    if (isRedisConnectionError(error)) return outages.failed(error);
    const full = redisFullError(error);
    logger.error({ queue: queueName, err: full ?? error }, full ? full.message : 'worker error');
  });
  worker.on('failed', (job, error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || error.name === 'UnrecoverableError';
    const bindings = { ...jobLogBindings(queueName, job), attempt: job.attemptsMade, final, reason: error.message };
    // A job its run's cancel stopped is cancelled, the word hat runs show and the report use: not an error line.
    if (errorCodeOf(error) === 'RUN_CANCELLED') logger.info(bindings, 'job cancelled: its run was cancelled');
    else logger[final ? 'error' : 'warn'](bindings, final ? 'job failed' : 'job attempt failed; will retry');
    observer?.jobFailed(queueName, job, error, final);
  });
  worker.on('completed', (job, result) => {
    if (logger.isLevelEnabled('debug')) {
      logger.debug(
        {
          ...jobLogBindings(queueName, job),
          durationMs: job.finishedOn && job.processedOn ? job.finishedOn - job.processedOn : undefined,
        },
        'job completed',
      );
    }
    observer?.jobCompleted(queueName, job, result);
  });
  return worker;
}

/** What a sandboxed child needs to rebuild the runtime (it shares no objects with the parent). */
export interface SandboxWorkerData {
  hatSandbox: { env: HatEnv; lockDurationMs?: number };
}

export interface StageWorkerOptions extends QueueWorkerOptions {
  env: HatEnv;
  /**
   * `auto`: CPU-heavy stages run in BullMQ sandboxed processors (worker threads over the
   * compiled `dist/workers/stage-sandbox.js`), falling back to in-process with a warning when it
   * is not built. `off`: always in-process (tests that inject fakes, debugging).
   */
  sandbox?: 'auto' | 'off';
  /**
   * The compiled sandbox entry (it registers the stages in the child thread, so the binding does
   * not import them): given by the process that knows its stages (workers/worker-pool.ts).
   */
  sandboxEntry?: string;
}

/** The Worker of one stage's queue (stage jobs and their parts). */
export function createStageWorker(
  stage: AnyStage,
  runtime: StageJobRuntime,
  options: StageWorkerOptions,
): { worker: Worker; sandboxed: boolean } {
  const lockDurationMs = options.lockDurationMs ?? stage.queue?.lockDurationMs ?? defaultLockDurationMs;
  if (stage.queue?.cpuHeavy && (options.sandbox ?? 'auto') === 'auto') {
    const file = options.sandboxEntry;
    if (file) {
      const workerData: SandboxWorkerData = { hatSandbox: { env: options.env, lockDurationMs } };
      return {
        worker: createQueueWorker(stage.name, file, { ...options, lockDurationMs, sandboxed: true, workerData }),
        sandboxed: true,
      };
    }
    options.logger.warn(
      { stage: stage.name },
      'CPU-heavy stage runs in-process: dist/workers/stage-sandbox.js is not built (run `npm run build`)',
    );
  }
  const cancels = new JobCancels();
  const processor = createInProcessStageJobProcessor(stage, runtime, cancels, {
    lockDurationMs,
  }) as unknown as Processor;
  return {
    worker: createQueueWorker(stage.name, processor, { ...options, lockDurationMs, cancels }),
    sandboxed: false,
  };
}

/**
 * Closes workers within a bound. First a normal close (stop fetching, let active jobs finish);
 * past `timeoutMs`, active jobs are cancelled, which makes our processors hand their jobs back to
 * the wait list at once (see stage-job-processor.ts) so another worker takes them. Returns
 * whether the bound was hit. Never waits longer than `timeoutMs + graceMs`: `worker.close()` can
 * hang (unreachable Redis, a processor that ignores its signal), and a shutdown must end.
 */
export async function closeWorkersWithin(
  workers: Worker[],
  timeoutMs: number,
  logger: Logger,
  graceMs = 2_000,
): Promise<{ forced: boolean }> {
  const closing = Promise.allSettled(workers.map((worker) => worker.close()));
  if (await settlesWithin(closing, timeoutMs)) return { forced: false };
  logger.warn({ timeoutMs }, 'shutdown bound reached; handing active jobs back to the queue');
  for (const worker of workers) worker.cancelAllJobs('shutdown');
  if (!(await settlesWithin(closing, graceMs)))
    logger.error({ graceMs }, 'workers did not close after handing jobs back; exiting anyway (their locks will lapse)');
  return { forced: true };
}

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
