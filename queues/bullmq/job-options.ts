import type { BackoffStrategy, JobsOptions, KeepJobs, MinimalJob } from 'bullmq';
import { findUrlCredentials } from '../../shared/config/url-credentials';
import { BadInputError } from '../../shared/errors';
import { backoffDelay, defaultAttempts, defaultBackoffMs } from '../stage-kit/retry-policy';

export { backoffDelay, defaultAttempts, defaultBackoffMs, maxBackoffMs } from '../stage-kit/retry-policy';

/** Name of the backoff type registered by every worker (see `hatBackoffStrategy`). */
export const backoffType = 'hat-exponential-jitter';

const day = 24 * 3600;

/**
 * Retention of finished jobs: enough to inspect and retry a run, bounded so Redis does not grow
 * without end. Failed jobs stay longer than completed ones: `hat runs retry` needs them.
 */
export const stageRetention: { completed: KeepJobs; failed: KeepJobs } = {
  completed: { age: 7 * day, count: 20_000 },
  failed: { age: 30 * day, count: 50_000 },
};
/** Runs are few and are what operators look up: keep them longer. */
export const runRetention: { completed: KeepJobs; failed: KeepJobs } = {
  completed: { age: 90 * day, count: 2_000 },
  failed: { age: 90 * day, count: 2_000 },
};
/** Events stream length per queue (BullMQ trims approximately); job data and results are small. */
export const eventsMaxLength = 2_000;

export interface RetryDefaults {
  attempts?: number;
  backoffMs?: number;
}

/** Options of a stage or part job: attempts with our backoff, retention and the data size limit. */
export function stageJobOptions(defaults: RetryDefaults, sizeLimit: number): JobsOptions {
  return {
    attempts: defaults.attempts ?? defaultAttempts,
    backoff: { type: backoffType, delay: defaults.backoffMs ?? defaultBackoffMs },
    removeOnComplete: stageRetention.completed,
    removeOnFail: stageRetention.failed,
    sizeLimit,
  };
}

/** Options of the run's parent job: its work (manifest and report) retries a few times. */
export function runJobOptions(sizeLimit: number): JobsOptions {
  return {
    attempts: 3,
    backoff: { type: backoffType, delay: defaultBackoffMs },
    removeOnComplete: runRetention.completed,
    removeOnFail: runRetention.failed,
    sizeLimit,
  };
}

/**
 * Exponential backoff with jitter: `delay * 2^(attempt-1)`, capped, then scaled by a random
 * factor in [0.5, 1] so retries of many parts that failed together (a 429 burst) spread out. A
 * server's Retry-After hint (TransientError.retryAfterMs) is a floor. Written by hand because
 * BullMQ's built-in jitter cannot see the error's hint.
 */
export const hatBackoffStrategy: BackoffStrategy = (
  attemptsMade: number,
  type?: string,
  error?: Error,
  job?: MinimalJob,
) => {
  const backoff = job?.opts.backoff;
  const base = typeof backoff === 'object' && typeof backoff.delay === 'number' ? backoff.delay : defaultBackoffMs;
  if (type !== undefined && type !== backoffType) return base;
  return backoffDelay(attemptsMade, base, error);
};

/** Bytes of a value as BullMQ stores it (JSON). */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/**
 * Refuses job data before it reaches Redis when it is over the limit (jobs carry artifact URIs and
 * small parameters, never payloads) or holds a URL with credentials anywhere (Redis keeps job data,
 * the dashboard shows it: keys come from the environment). Every edge refuses such URLs already;
 * this catches one that came another way, such as a promotion pointer written before.
 */
export function checkJobData(
  data: unknown,
  limit: number,
  what: { stage?: string; label?: string; jobId?: string },
): void {
  const subject = () => `${what.label ?? `stage "${what.stage}"`}${what.jobId ? ` (job ${what.jobId})` : ''}`;
  const bytes = jsonBytes(data);
  if (bytes > limit) {
    throw new BadInputError(
      'JOB_DATA_TOO_LARGE',
      `job data for ${subject()} is ${bytes} bytes, over the limit of ${limit} bytes (HAT_JOB_DATA_LIMIT); ` +
        'put large inputs in the artifact store and pass their URIs',
      { details: { stage: what.stage, bytes, limit } },
    );
  }
  const [credentials] = findUrlCredentials(data);
  if (credentials)
    throw new BadInputError(
      'URI_CREDENTIALS',
      `job data for ${subject()}: ${credentials.path.join('.') || 'the value'} ${credentials.message}`,
      { details: { stage: what.stage, field: credentials.path.join('.') } },
    );
}
