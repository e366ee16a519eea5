import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { HatEnv } from '../../shared/config/env';
import { BadInputError, HatError } from '../../shared/errors';

/** A connection BullMQ accepts: one Redis, or a Redis Cluster (REDIS_CLUSTER_NODES). */
export type RedisClient = Redis | Cluster;

/** The settings that choose where Redis is. */
export type RedisEnv = Pick<HatEnv, 'REDIS_URL'> & Partial<Pick<HatEnv, 'REDIS_CLUSTER_NODES'>>;

/**
 * `worker`: long-lived processes that must ride out Redis restarts (BullMQ requires
 * `maxRetriesPerRequest: null` for workers). `producer`: the CLI and other short-lived callers,
 * which should fail fast instead of queueing commands while Redis is away. `watcher`: a CLI
 * that follows a run (`hat run --wait`): each command fails fast while Redis is away, but the
 * connection keeps reconnecting, so the watcher can ride out a restart and decide itself how long
 * to wait.
 */
export type RedisRole = 'worker' | 'producer' | 'watcher';

export interface RedisConnectionOptions {
  /** Shown in `CLIENT LIST`; helps tell workers apart. */
  connectionName?: string;
}

/** A few quick reconnects, then give up so a producer's command reports the outage instead of hanging. */
const producerRetryStrategy = (times: number): number | null => (times > 3 ? null : times * 200);

/** Reconnect for as long as the watcher waits, at most every two seconds. */
const watcherRetryStrategy = (times: number): number => Math.min(times * 200, 2_000);

/**
 * One ioredis connection for BullMQ: a Cluster when REDIS_CLUSTER_NODES is set, else one Redis at
 * REDIS_URL. Keys are namespaced with BullMQ's `prefix` option, never ioredis `keyPrefix`
 * (BullMQ's Lua scripts build keys themselves and would miss it).
 */
export function createRedisConnection(
  env: RedisEnv,
  role: RedisRole,
  options: RedisConnectionOptions = {},
): RedisClient {
  const roleOptions: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          connectTimeout: 5_000,
          retryStrategy: role === 'watcher' ? watcherRetryStrategy : producerRetryStrategy,
        };
  const connection: RedisClient = env.REDIS_CLUSTER_NODES
    ? createClusterConnection(env.REDIS_CLUSTER_NODES, role, { connectionName: options.connectionName, ...roleOptions })
    : new Redis(env.REDIS_URL, { connectionName: options.connectionName, lazyConnect: false, ...roleOptions });
  // Without a listener ioredis prints every reconnect error; callers see failures through commands.
  connection.on('error', () => undefined);
  return connection;
}

function createClusterConnection(nodesSetting: string, role: RedisRole, nodeOptions: RedisOptions): Cluster {
  const { nodes, redisOptions } = parseClusterNodes(nodesSetting);
  // Per-node options go in redisOptions; the cluster's own retry and offline queue mirror them.
  const { retryStrategy: _perNode, enableOfflineQueue, ...perNode } = nodeOptions;
  const clusterOptions: ClusterOptions = {
    redisOptions: { ...perNode, ...redisOptions },
    enableReadyCheck: true,
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
    ...(role === 'producer' ? { clusterRetryStrategy: producerRetryStrategy } : {}),
    ...(role === 'watcher' ? { clusterRetryStrategy: watcherRetryStrategy } : {}),
  };
  return new Cluster(nodes, clusterOptions);
}

/**
 * REDIS_CLUSTER_NODES as ioredis seed nodes. Entries are `host:port` or `redis[s]://[user:pass@]host:port`;
 * the first URL's credentials and TLS apply to every node (a cluster shares them), since
 * ioredis connects to nodes it discovers with one set of options.
 */
export function parseClusterNodes(setting: string): { nodes: ClusterNode[]; redisOptions: RedisOptions } {
  const entries = setting
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  let redisOptions: RedisOptions | undefined;
  const nodes = entries.map((entry) => {
    const url = new URL(/^rediss?:\/\//.test(entry) ? entry : `redis://${entry}`);
    const port = Number(url.port || 6379);
    if (!url.hostname || !Number.isInteger(port)) {
      throw new BadInputError(
        'BAD_ENV',
        `REDIS_CLUSTER_NODES entry "${redactUrl(entry)}" is not host:port; list seed nodes as host:port,host:port`,
      );
    }
    redisOptions ??= {
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
    return { host: url.hostname, port };
  });
  if (nodes.length === 0)
    throw new BadInputError('BAD_ENV', 'REDIS_CLUSTER_NODES is empty; list seed nodes as host:port,host:port');
  return { nodes, redisOptions: redisOptions ?? {} };
}

/** Where Redis is, for messages: the cluster seed nodes or REDIS_URL, passwords hidden. */
export function redisTarget(env: RedisEnv): string {
  return env.REDIS_CLUSTER_NODES ? `cluster ${redactUrl(env.REDIS_CLUSTER_NODES)}` : redactUrl(env.REDIS_URL);
}

/**
 * Waits until the connection is ready, or throws `REDIS_UNAVAILABLE` naming the URL and what to
 * do. Producers call this first so a stopped Redis gives one clear line, not a stack trace.
 */
export async function waitForRedis(connection: RedisClient, url: string, timeoutMs = 5_000): Promise<void> {
  if (connection.status === 'ready') return;
  const setting = connection instanceof Cluster ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
  await new Promise<void>((resolve, reject) => {
    const fail = (reason: string) => {
      cleanup();
      reject(
        new HatError(
          'REDIS_UNAVAILABLE',
          `cannot reach Redis at ${redactUrl(url)} (${reason}); start Redis or set ${setting}`,
        ),
      );
    };
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onEnd = () => fail('connection closed');
    const onError = (error: Error) => {
      if (connection.status === 'end') fail(error.message);
    };
    const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs);
    function cleanup() {
      clearTimeout(timer);
      connection.off('ready', onReady);
      connection.off('end', onEnd);
      connection.off('error', onError);
    }
    connection.once('ready', onReady);
    connection.once('end', onEnd);
    connection.on('error', onError);
  });
}

/** Closes a connection, tolerating one that is already gone. */
export async function closeRedisConnection(connection: RedisClient): Promise<void> {
  if (connection.status === 'end') return;
  // A connection that is reconnecting (Redis away) has nothing to flush; QUIT would wait for it.
  if (connection.status !== 'ready') {
    connection.disconnect();
    return;
  }
  try {
    await connection.quit();
  } catch {
    connection.disconnect();
  }
}

/** The URL (or comma-separated URLs) without passwords, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/,]*):[^@/,]*@/g, '//$1:***@');
}

/** Keys of one Redis node matching `pattern`, a SCAN batch at a time (never KEYS, which blocks the server). */
export async function* scanKeyBatches(
  client: Pick<Redis, 'scan'>,
  pattern: string,
  count = 1000,
): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', count);
    cursor = next;
    if (keys.length > 0) yield keys;
  } while (cursor !== '0');
}

/** Deletes every key of one Redis node matching `pattern` (test and benchmark prefixes), batch by batch. */
export async function deleteKeysMatching(client: Pick<Redis, 'scan' | 'unlink'>, pattern: string): Promise<void> {
  for await (const keys of scanKeyBatches(client, pattern)) await client.unlink(...keys);
}

/** ioredis's texts for a command that could not reach Redis (as opposed to an answer from it). */
const connectionErrorPattern =
  /Stream isn't writeable|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|max retries per request|MaxRetriesPerRequest|Reached the max retries|connect ETIMEDOUT|Redis is unavailable|Cluster(All)?FailedError|Failed to refresh slots cache/i;

/** Whether an error means Redis could not be reached (worth waiting out), not a failed command. */
export function isRedisConnectionError(error: unknown): boolean {
  // Not `instanceof Error`: a socket error may come from another realm (a test VM context).
  if (typeof error !== 'object' || error === null) return false;
  const { code, name, message } = error as { code?: unknown; name?: unknown; message?: unknown };
  if (typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code))
    return true;
  return typeof message === 'string' && connectionErrorPattern.test(`${String(name)}: ${message}`);
}
