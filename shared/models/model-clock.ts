import { HatError } from '../errors';
import { unwatchAbort, watchAbort } from './abort-watch';

/**
 * Wall clock and sleeping for model clients, injectable so tests can check retry waits without
 * waiting them. Latency measurements never go through this: they always use the real
 * `performance.now()`.
 */
export interface ModelClock {
  /** Epoch milliseconds (used to read `Retry-After` HTTP dates). */
  now(): number;
  /** Resolves after `ms`; rejects with `MODEL_ABORTED` when the signal aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: ModelClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => abortableDelay(ms, signal),
};

/** The error every model-client wait throws when the caller aborts. */
export function abortedError(signal: AbortSignal | undefined): HatError {
  const reason = signal?.reason instanceof Error ? signal.reason.message : signal?.reason;
  return new HatError(
    'MODEL_ABORTED',
    `the model call was aborted by the caller${reason ? ` (${String(reason)})` : ''}`,
    {
      cause: signal?.reason,
    },
  );
}

/**
 * setTimeout as a promise that an AbortSignal can cut short, rejecting with `reasonOf(signal)`
 * (default MODEL_ABORTED).
 */
export function abortableDelay(
  ms: number,
  signal?: AbortSignal,
  reasonOf: (signal?: AbortSignal) => unknown = abortedError,
): Promise<void> {
  if (signal?.aborted) return Promise.reject(reasonOf(signal));
  if (ms <= 0 && !signal) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(reasonOf(signal));
    };
    const timer = setTimeout(
      () => {
        if (signal) unwatchAbort(signal, onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    if (signal) watchAbort(signal, onAbort);
  });
}
