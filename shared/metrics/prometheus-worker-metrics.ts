import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../log/logger';
import { countersFromStats, countersOf } from './prometheus-stage-counters';

/**
 * The Prometheus metrics of one worker process (`hat worker --metrics-port`), in their own
 * registry so several pools in one process (tests, `hat demo`) never collide:
 *
 * - `hat_queue_jobs{queue,state}` gauge: jobs per BullMQ state of every queue this process
 *   serves, read with getJobCounts on scrape (cached for `depthCacheMs`, so many scrapers cost
 *   Redis one round per interval).
 * - `hat_job_duration_seconds{queue,job,outcome}` histogram: a stage job from its plan step to
 *   its fan-in (the whole stage), any other job (parts, runs) its last processing.
 * - `hat_jobs_completed_total{queue,job}`, `hat_job_retries_total{queue,code}` (an attempt
 *   failed and will be retried), `hat_job_failures_total{queue,code}` (failed for good); `code`
 *   is the `[CODE]` the error message starts with, `UNKNOWN` without one. A job its run's cancel
 *   stopped counts in `hat_jobs_cancelled_total{queue}` instead (duration outcome `cancelled`).
 * - `hat_stage_counter_total{stage,counter}`: what stages report (see prometheus-stage-counters.ts).
 * - `hat_queue_depth_errors_total`: scrapes that could not read queue depths (the last values stay).
 * - With `processMetrics`, prom-client's default process metrics (CPU, memory, event loop lag).
 */

/** The job fields the metrics read (a BullMQ Job satisfies it). */
export interface ObservedJob {
  name: string;
  processedOn?: number;
  finishedOn?: number;
}

/** Job states reported by `hat_queue_jobs`. */
export const queueDepthStates = [
  'waiting',
  'prioritized',
  'active',
  'delayed',
  'waiting-children',
  'completed',
  'failed',
] as const;

export interface WorkerMetricsOptions {
  /** Queues whose depths this process reports. */
  queues: string[];
  /** Job counts of a queue by state (BullMQ `Queue.getJobCounts(...queueDepthStates)`). */
  jobCounts(queue: string): Promise<Record<string, number>>;
  /** The `stats` of a stage manifest (rule 3 of stage counters); absent: rule 3 is off. */
  readManifestStats?(manifestUri: string): Promise<unknown>;
  /** Whether a stage's parts report counters (rule 1), so its stage job is not counted again. */
  partCountersDeclared?(stage: string): boolean;
  /** A completed part's counters by its stage contract (rule 1); undefined: read `output.counters`. */
  partCounters?(stage: string, output: unknown): Record<string, number> | undefined;
  /** How long queue depths are reused between scrapes, ms. Default 2000. */
  depthCacheMs?: number;
  /** Adds prom-client's default process metrics. Default false. */
  processMetrics?: boolean;
  logger?: Logger;
}

/** Error codes become label values; anything without a `[CODE]` prefix is UNKNOWN. */
export function errorCodeOf(message: string | undefined): string {
  return /^\[([A-Z][A-Z0-9_]{0,63})\]/.exec(message ?? '')?.[1] ?? 'UNKNOWN';
}

/** The code a job fails with when a cancel of its run stopped it (queues/bullmq/stage-job-processor.ts). */
const cancelledCode = 'RUN_CANCELLED';

/** Seconds buckets from 50 ms to 2 h: short parts and hour-long stages both resolve. */
const durationBuckets = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];

export class WorkerMetrics {
  readonly registry = new Registry();
  readonly #options: WorkerMetricsOptions;
  readonly #durations: Histogram<'queue' | 'job' | 'outcome'>;
  readonly #completed: Counter<'queue' | 'job'>;
  readonly #retries: Counter<'queue' | 'code'>;
  readonly #failures: Counter<'queue' | 'code'>;
  readonly #cancelled: Counter<'queue'>;
  readonly #stageCounters: Counter<'stage' | 'counter'>;
  readonly #depthErrors: Counter;
  /** Manifest reads in flight: a scrape waits for them so a finished stage is already counted. */
  readonly #pending = new Set<Promise<void>>();
  #depths?: { at: number; reading: Promise<Map<string, Record<string, number>>> };
  #lastDepths = new Map<string, Record<string, number>>();

  constructor(options: WorkerMetricsOptions) {
    this.#options = options;
    const registers = [this.registry];
    this.#durations = new Histogram({
      name: 'hat_job_duration_seconds',
      help: 'Job duration: a stage job from plan to fan-in, other jobs their last processing',
      labelNames: ['queue', 'job', 'outcome'],
      buckets: durationBuckets,
      registers,
    });
    this.#completed = new Counter({
      name: 'hat_jobs_completed_total',
      help: 'Jobs completed',
      labelNames: ['queue', 'job'],
      registers,
    });
    this.#retries = new Counter({
      name: 'hat_job_retries_total',
      help: 'Job attempts that failed and will be retried, by error code',
      labelNames: ['queue', 'code'],
      registers,
    });
    this.#failures = new Counter({
      name: 'hat_job_failures_total',
      help: 'Jobs that failed for good, by error code',
      labelNames: ['queue', 'code'],
      registers,
    });
    this.#cancelled = new Counter({
      name: 'hat_jobs_cancelled_total',
      help: 'Jobs stopped because their run was cancelled (hat runs cancel); not counted as failures',
      labelNames: ['queue'],
      registers,
    });
    this.#stageCounters = new Counter({
      name: 'hat_stage_counter_total',
      help: 'Work reported by stages (trajectories, variants, tokens, episodes, ...)',
      labelNames: ['stage', 'counter'],
      registers,
    });
    this.#depthErrors = new Counter({
      name: 'hat_queue_depth_errors_total',
      help: 'Scrapes that could not read queue depths from Redis',
      registers,
    });
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client calls collect() with the gauge as `this`
    const metrics = this;
    new Gauge({
      name: 'hat_queue_jobs',
      help: 'Jobs in each BullMQ state, per queue served by this worker',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const depths = await metrics.#readDepths();
        this.reset();
        for (const [queue, counts] of depths) {
          for (const state of queueDepthStates) this.set({ queue, state }, counts[state] ?? 0);
        }
      },
    });
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** A job completed; `result` is what its processor returned. */
  jobCompleted(queue: string, job: ObservedJob, result: unknown): void {
    this.#completed.inc({ queue, job: job.name });
    const stageResult = result as
      | { kind?: unknown; startedAt?: unknown; finishedAt?: unknown; output?: unknown; manifestUri?: unknown }
      | null
      | undefined;
    const seconds =
      stageResult?.kind === 'stage' &&
      typeof stageResult.startedAt === 'number' &&
      typeof stageResult.finishedAt === 'number'
        ? (stageResult.finishedAt - stageResult.startedAt) / 1000
        : this.#processingSeconds(job);
    if (seconds !== undefined)
      this.#durations.observe({ queue, job: job.name, outcome: 'completed' }, Math.max(0, seconds));
    if (stageResult?.kind === 'part') this.#count(queue, this.#partCounters(queue, stageResult.output));
    else if (stageResult?.kind === 'stage' && !this.#options.partCountersDeclared?.(queue)) {
      const counters = countersOf(stageResult.output);
      if (counters) this.#count(queue, counters);
      else if (typeof stageResult.manifestUri === 'string') this.#countManifest(queue, stageResult.manifestUri);
    }
  }

  /**
   * An attempt failed; `final` when no retry follows. A job its run's cancel stopped
   * (`RUN_CANCELLED`) is cancelled, as `hat runs show` and the report say, not a failure to alert on.
   */
  jobFailed(queue: string, job: ObservedJob, error: Error, final: boolean): void {
    const code = errorCodeOf(error.message);
    const cancelled = code === cancelledCode;
    if (cancelled) this.#cancelled.inc({ queue });
    else (final ? this.#failures : this.#retries).inc({ queue, code });
    const seconds = this.#processingSeconds(job);
    if (seconds !== undefined)
      this.#durations.observe(
        { queue, job: job.name, outcome: cancelled ? 'cancelled' : 'failed' },
        Math.max(0, seconds),
      );
  }

  /** The exposition text (waits for stage counters still being read). */
  async render(): Promise<string> {
    await Promise.allSettled([...this.#pending]);
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  #processingSeconds(job: ObservedJob): number | undefined {
    if (job.processedOn === undefined || job.processedOn === null) return undefined;
    return ((job.finishedOn ?? Date.now()) - job.processedOn) / 1000;
  }

  #count(stage: string, counters: Record<string, number> | undefined): void {
    for (const [counter, value] of Object.entries(counters ?? {}))
      if (value > 0) this.#stageCounters.inc({ stage, counter }, value);
  }

  #partCounters(stage: string, output: unknown): Record<string, number> | undefined {
    try {
      return this.#options.partCounters?.(stage, output) ?? countersOf(output);
    } catch (error) {
      // Metrics never fail a job: a part output the contract cannot read is logged and skipped.
      this.#options.logger?.warn({ stage, err: error }, 'cannot read the counters of a part');
      return undefined;
    }
  }

  #countManifest(stage: string, manifestUri: string): void {
    const read = this.#options.readManifestStats;
    if (!read) return;
    const pending: Promise<void> = read(manifestUri)
      .then((stats) => this.#count(stage, countersFromStats(stats)))
      .catch((error: unknown) =>
        this.#options.logger?.warn(
          { stage, manifestUri, err: error },
          'cannot read the stage manifest for its counters',
        ),
      )
      .finally(() => this.#pending.delete(pending));
    this.#pending.add(pending);
  }

  #readDepths(): Promise<Map<string, Record<string, number>>> {
    const now = Date.now();
    if (this.#depths && now - this.#depths.at < (this.#options.depthCacheMs ?? 2_000)) return this.#depths.reading;
    const reading = (async () => {
      try {
        const entries = await Promise.all(
          this.#options.queues.map(async (queue) => [queue, await this.#options.jobCounts(queue)] as const),
        );
        this.#lastDepths = new Map(entries);
      } catch (error) {
        // A scrape must still answer while Redis is away: report the last depths and count the miss.
        this.#depthErrors.inc();
        this.#options.logger?.warn({ err: error }, 'cannot read queue depths for metrics');
      }
      return this.#lastDepths;
    })();
    this.#depths = { at: now, reading };
    return reading;
  }
}

export function createWorkerMetrics(options: WorkerMetricsOptions): WorkerMetrics {
  return new WorkerMetrics(options);
}
