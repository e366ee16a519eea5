import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ArtifactStore, ObjectInfo, PutOptions } from '../../shared/artifacts/artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { loadEnv, type HatEnv } from '../../shared/config/env';
import { silentLogger } from '../../shared/log/logger';
import { openQueueContext, type QueueContext } from '../../queues/bullmq/queue-context';
import { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from '../../workers/worker-pool';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { deleteKeysMatching } from '../../queues/bullmq/redis-connection';

/**
 * One isolated world per test: a fresh BullMQ prefix (`test-<uuid>`), a temp directory as the
 * artifact root, a producer-side queue context, and workers started on demand. `cleanup()`
 * closes everything and deletes every Redis key of the prefix.
 */
export interface QueueTestKit {
  env: HatEnv;
  prefix: string;
  artifactsDirectory: string;
  artifactsRoot: string;
  context: QueueContext;
  /** The order in which objects were put, by key (through every worker of this kit). */
  putOrder: string[];
  /** A store over the artifact root (for assertions). */
  store: ArtifactStore;
  startWorkers(options?: Partial<WorkerPoolOptions>): Promise<WorkerPool>;
  cleanup(): Promise<void>;
}

/** A FileArtifactStore that records put order (to check that manifests are written last). */
class RecordingStore extends FileArtifactStore {
  constructor(
    root: string,
    private readonly order: string[],
  ) {
    super(root);
  }

  override async put(
    key: string,
    body: Parameters<ArtifactStore['put']>[1],
    options?: PutOptions,
  ): Promise<ObjectInfo> {
    const info = await super.put(key, body, options);
    this.order.push(key);
    return info;
  }
}

/** `hashTag`: a Redis Cluster style prefix `{test-<uuid>}` (every key of the flow in one slot). */
export async function createQueueTestKit(
  envOverrides: Record<string, string> = {},
  options: { hashTag?: boolean } = {},
): Promise<QueueTestKit> {
  registerCatalogStages();
  const prefix = options.hashTag ? `{test-${randomUUID()}}` : `test-${randomUUID()}`;
  const artifactsDirectory = await mkdtemp(join(tmpdir(), 'hat-queues-'));
  const artifactsRoot = pathToFileURL(artifactsDirectory).href;
  const env = loadEnv({
    ...process.env,
    HAT_REDIS_PREFIX: prefix,
    HAT_ARTIFACTS: artifactsRoot,
    HAT_LOG_LEVEL: 'silent',
    ...envOverrides,
  });
  const context = await openQueueContext(env);
  const putOrder: string[] = [];
  const pools: WorkerPool[] = [];
  return {
    env,
    prefix,
    artifactsDirectory,
    artifactsRoot,
    context,
    putOrder,
    store: new FileArtifactStore(artifactsDirectory),
    async startWorkers(options = {}) {
      const pool = await startWorkerPool({
        env,
        logger: silentLogger(),
        sandbox: 'off',
        openStore: (rootUri) =>
          rootUri === artifactsRoot
            ? new RecordingStore(artifactsDirectory, putOrder)
            : new FileArtifactStore(new URL(rootUri).pathname),
        ...options,
      });
      pools.push(pool);
      await pool.waitUntilReady();
      return pool;
    },
    async cleanup() {
      await Promise.allSettled(pools.map((pool) => pool.close(5_000)));
      await deleteKeys(context, prefix);
      await context.close();
      await rm(artifactsDirectory, { recursive: true, force: true });
    },
  };
}

async function deleteKeys(context: QueueContext, prefix: string): Promise<void> {
  await deleteKeysMatching(context.connection, `${prefix}:*`);
}

/** Polls until the predicate holds (or fails after `timeoutMs`). */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
