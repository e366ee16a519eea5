import type { Readable } from 'node:stream';
import type { ArtifactStore, ObjectInfo, PutOptions } from './artifact-store';
import { isStorageFault } from './storage-errors';

export interface StorageRetryEvent {
  operation: string;
  key: string;
  attempt: number;
  delayMs: number;
  timeLeftMs: number;
  error: unknown;
}

/** How long a store waits out storage faults before giving up (HAT_STORAGE_RETRY_* settings). */
export interface StorageRetryPolicy {
  /** Total time spent retrying one operation, ms; 0 turns retries off. */
  budgetMs: number;
  /** First wait, ms (doubles per retry, capped, with jitter). */
  initialDelayMs: number;
  /** Longest single wait, ms. */
  maxDelayMs: number;
  /** Told before each wait (a log line, a metric); `timeLeftMs`: what is left of `budgetMs` before this wait. */
  onRetry?: (event: StorageRetryEvent) => void;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  random?: () => number;
}

/**
 * A store that retries storage faults (S3 5xx after the SDK's own attempts, a read-only remount,
 * a full disk, a lost mount) with capped exponential backoff for up to `budgetMs`, so a storage
 * outage of a few minutes delays a run instead of failing it. Only what can be repeated safely is
 * retried: puts of buffered bodies (a stream cannot be replayed, so its failure goes to the job's
 * own retry), reads, heads, deletes, and a listing that failed before yielding anything.
 */
export function withStorageRetries(store: ArtifactStore, policy: StorageRetryPolicy): ArtifactStore {
  if (policy.budgetMs <= 0) return store;
  const sleep = policy.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const now = policy.now ?? Date.now;
  const random = policy.random ?? Math.random;

  async function retrying<T>(operation: string, key: string, work: () => Promise<T>): Promise<T> {
    const startedAt = now();
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await work();
      } catch (error) {
        const elapsed = now() - startedAt;
        if (!isStorageFault(error) || elapsed >= policy.budgetMs) {
          if (attempt > 1 && error instanceof Error)
            error.message += ` (retried ${attempt - 1} time${attempt === 2 ? '' : 's'} over ${Math.round(elapsed / 1000)} s)`;
          throw error;
        }
        const exponential = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
        const delayMs = Math.min(
          Math.round(exponential * (0.5 + random() * 0.5)),
          Math.max(0, policy.budgetMs - elapsed),
        );
        policy.onRetry?.({ operation, key, attempt, delayMs, timeLeftMs: policy.budgetMs - elapsed, error });
        await sleep(delayMs);
      }
    }
  }

  return {
    get rootUri() {
      return store.rootUri;
    },
    uriOf: (key) => store.uriOf(key),
    keyOf: (uri) => store.keyOf(uri),
    put(key: string, body: string | Uint8Array | Readable, options?: PutOptions): Promise<ObjectInfo> {
      const replayable = typeof body === 'string' || ArrayBuffer.isView(body);
      return replayable ? retrying('put', key, () => store.put(key, body, options)) : store.put(key, body, options);
    },
    getStream: (key) => retrying('get', key, () => store.getStream(key)),
    getBuffer: (key) => retrying('get', key, () => store.getBuffer(key)),
    head: (key) => retrying('head', key, () => store.head(key)),
    delete: (key) => retrying('delete', key, () => store.delete(key)),
    list(prefix: string): AsyncIterable<ObjectInfo> {
      return {
        async *[Symbol.asyncIterator]() {
          // Retried only until the first object: after that a restart would repeat objects.
          // A generator that threw is finished: each attempt starts a fresh listing.
          let iterator = store.list(prefix)[Symbol.asyncIterator]();
          const first = await retrying('list', prefix, () => {
            iterator = store.list(prefix)[Symbol.asyncIterator]();
            return iterator.next();
          });
          if (first.done) return;
          yield first.value;
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            yield next.value;
          }
        },
      };
    },
    ...(store.sweepTemporary
      ? {
          sweepTemporary: (prefix: string) =>
            (store.sweepTemporary as (prefix: string) => Promise<number>).call(store, prefix),
        }
      : {}),
    close: () => store.close(),
  };
}
