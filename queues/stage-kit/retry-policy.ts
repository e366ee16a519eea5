import { HatError } from '../../shared/errors';

/**
 * How failed attempts are retried, the same under BullMQ (queues/bullmq/job-options.ts registers it
 * as a backoff strategy) and under `hat stage` (run-stage-locally.ts).
 */

/** Defaults every stage job gets unless its stage says otherwise. */
export const defaultAttempts = 5;
export const defaultBackoffMs = 1_000;
/** Longest wait between two attempts. */
export const maxBackoffMs = 10 * 60_000;

/** The wait before the next attempt after `attemptsMade` failed ones (see hatBackoffStrategy). */
export function backoffDelay(attemptsMade: number, baseMs: number, error?: unknown): number {
  const exponential = Math.min(maxBackoffMs, baseMs * 2 ** Math.max(0, attemptsMade - 1));
  const jittered = Math.round(exponential * (0.5 + Math.random() * 0.5));
  const hint = HatError.isInstance(error) ? (error as { retryAfterMs?: number }).retryAfterMs : undefined;
  return typeof hint === 'number' && hint > jittered ? Math.min(hint, maxBackoffMs) : jittered;
}
