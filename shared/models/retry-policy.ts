import type { IncomingHttpHeaders } from 'node:http';
import { TransientError, isRetryable } from '../errors';

/** How a model client retries transient faults. */
export interface RetrySettings {
  /** Retries after the first attempt (0 = one attempt only). */
  maxRetries: number;
  /** Backoff before the first retry, ms; doubles per retry. */
  initialDelayMs: number;
  /** Cap of the exponential backoff, ms. */
  maxDelayMs: number;
  /**
   * Longest server-requested wait (`Retry-After`) honoured in-process, ms. A longer hint ends the
   * call with `MODEL_UNAVAILABLE` carrying the hint, so the job queue can reschedule instead of a
   * worker slot sleeping for minutes.
   */
  maxRetryAfterMs: number;
}

/** Share of the backoff removed at random, so clients that failed together do not retry together. */
const jitterShare = 0.25;

/** What to do after a failed attempt. */
export type RetryDecision =
  /** Try again after `delayMs`. */
  | { action: 'retry'; delayMs: number }
  /** The error is permanent (bad input, abort): rethrow it as it is. */
  | { action: 'fail' }
  /** Transient, but the retries are spent or the server asked for a longer wait than allowed. */
  | { action: 'give-up' };

/**
 * The one place that decides whether a failed model call is tried again and after how long:
 * permanent errors never are; transient ones are until the retries are spent, after the server's
 * `Retry-After` hint when it gave one, else after exponential backoff with jitter.
 */
export class RetryPolicy {
  constructor(
    readonly settings: RetrySettings,
    private readonly random: () => number = Math.random,
  ) {}

  /** `attemptsMade` counts attempts so far (1 after the first failure). */
  decide(error: unknown, attemptsMade: number): RetryDecision {
    if (!isRetryable(error)) return { action: 'fail' };
    if (attemptsMade > this.settings.maxRetries) return { action: 'give-up' };
    const hint = error instanceof TransientError ? error.retryAfterMs : undefined;
    if (hint !== undefined)
      return hint <= this.settings.maxRetryAfterMs ? { action: 'retry', delayMs: hint } : { action: 'give-up' };
    const exponential = Math.min(this.settings.maxDelayMs, this.settings.initialDelayMs * 2 ** (attemptsMade - 1));
    return { action: 'retry', delayMs: Math.round(exponential * (1 - jitterShare * this.random())) };
  }
}

/**
 * The server's retry hint in ms: `retry-after-ms` (OpenAI), else `Retry-After` as seconds or as
 * an HTTP date. Undefined when absent or unreadable.
 */
export function parseRetryAfter(headers: IncomingHttpHeaders, nowMs: number): number | undefined {
  const milliseconds = headerValue(headers['retry-after-ms'])?.trim();
  if (milliseconds && /^\d+(\.\d+)?$/.test(milliseconds)) return Math.round(Number(milliseconds));
  const value = headerValue(headers['retry-after'])?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
