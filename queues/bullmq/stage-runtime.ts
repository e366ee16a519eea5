import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import {
  createArtifactStore,
  openArtifactObject,
  type ArtifactStoreEnv,
} from '../../shared/artifacts/create-artifact-store';
import { withStorageRetries, type StorageRetryEvent } from '../../shared/artifacts/retrying-artifact-store';
import { setLargestRecordBytes } from '../../shared/artifacts/record-limit';
import type { Logger } from '../../shared/log/logger';
import { systemClock, type Clock, type StageServices } from '../stage-kit/define-stage';
import { isRunCancelled } from './run-cancelled';
import type { QueueContext } from './queue-context';
import type { PartJobSpec, StageJobRuntime } from './stage-job-processor';

/** Artifact stores by root URI, opened once per process and closed together. */
export interface StoreCache {
  storeFor(rootUri: string): ArtifactStore;
  /** The store and key of any object URI: a cached store when the URI lies under one. */
  openObject(uri: string): { store: ArtifactStore; key: string };
  close(): Promise<void>;
}

/** One warn line per storage retry: which object, the cause, the wait and what is left of HAT_STORAGE_RETRY_MS. */
function logStorageRetry(logger: Logger, store: ArtifactStore, event: StorageRetryEvent): void {
  const uri = store.uriOf(event.key);
  const cause = event.error instanceof Error ? event.error.message : String(event.error);
  const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
  logger.warn(
    {
      operation: event.operation,
      uri,
      attempt: event.attempt,
      delayMs: event.delayMs,
      timeLeftMs: event.timeLeftMs,
      err: event.error,
    },
    `storage fault on ${event.operation} ${uri} (${cause}); retry ${event.attempt} in ${seconds(event.delayMs)}, ${seconds(event.timeLeftMs)} of HAT_STORAGE_RETRY_MS left`,
  );
}

/**
 * Stores of one process, each opened once. With HAT_STORAGE_RETRY_MS set (a parsed env has its
 * default), every store waits out storage faults (see withStorageRetries). HAT_MAX_RECORD_BYTES
 * becomes the process's largest record (record-limit.ts): every process that reads inputs opens
 * its stores here.
 */
export function createStoreCache(
  env: ArtifactStoreEnv,
  open: (rootUri: string) => ArtifactStore = (rootUri) => createArtifactStore(rootUri, env),
  logger?: Logger,
): StoreCache {
  const stores = new Map<string, ArtifactStore>();
  if (env.HAT_MAX_RECORD_BYTES !== undefined) setLargestRecordBytes(env.HAT_MAX_RECORD_BYTES);
  const policy = {
    budgetMs: env.HAT_STORAGE_RETRY_MS ?? 0,
    initialDelayMs: 500,
    maxDelayMs: env.HAT_STORAGE_RETRY_MAX_DELAY_MS ?? 30_000,
  };
  const retrying = (store: ArtifactStore) =>
    withStorageRetries(store, {
      ...policy,
      ...(logger ? { onRetry: (event: StorageRetryEvent) => logStorageRetry(logger, store, event) } : {}),
    });
  const storeFor = (rootUri: string): ArtifactStore => {
    // Job data names the same root on every job: the common case is one lookup, no regex.
    const root = rootUri.endsWith('/') ? rootUri.replace(/\/+$/, '') : rootUri;
    let store = stores.get(root);
    if (!store) {
      store = retrying(open(root));
      stores.set(root, store);
    }
    return store;
  };
  return {
    storeFor,
    openObject(uri) {
      for (const store of stores.values()) {
        if (uri.startsWith(`${store.rootUri}/`)) return { store, key: store.keyOf(uri) };
      }
      const opened = openArtifactObject(uri, env);
      const cached = stores.get(opened.store.rootUri);
      if (cached) {
        void opened.store.close();
        return { store: cached, key: opened.key };
      }
      const store = retrying(opened.store);
      stores.set(store.rootUri, store);
      return { store, key: opened.key };
    },
    async close() {
      await Promise.allSettled([...stores.values()].map((store) => store.close()));
      stores.clear();
    },
  };
}

export interface StageRuntimeOptions {
  context: QueueContext;
  stores: StoreCache;
  logger: Logger;
  clock?: Clock;
  services?: StageServices;
}

/** Part jobs go to Redis in batches of this many (one MULTI each). */
const addBatchSize = 500;

/** The StageJobRuntime of a process that talks to Redis through a QueueContext. */
export function createStageJobRuntime(options: StageRuntimeOptions): StageJobRuntime {
  const { context } = options;
  return {
    jobDataLimit: context.env.HAT_JOB_DATA_LIMIT,
    logger: options.logger,
    clock: options.clock ?? systemClock,
    services: options.services ?? {},
    storeFor: options.stores.storeFor,
    openObject: options.stores.openObject,
    async addParts(stage: string, parts: PartJobSpec[]) {
      const queue = context.queue(stage);
      for (let start = 0; start < parts.length; start += addBatchSize) {
        await queue.addBulk(parts.slice(start, start + addBatchSize));
      }
    },
    isRunCancelled: (runId: string) => isRunCancelled(context, runId),
    async holdsLock(job, token) {
      return (await context.connection.get(`${job.queueQualifiedName}:${job.id ?? ''}:lock`)) === token;
    },
    storageRetry: {
      budgetMs: context.env.HAT_STORAGE_RETRY_MS,
      maxDelayMs: context.env.HAT_STORAGE_RETRY_MAX_DELAY_MS,
    },
  };
}
