import { Redis, type RedisOptions } from 'ioredis';
import type { HatEnv } from '../shared/config/env';
import { HatError } from '../shared/errors';

/**
 * `worker`: long-lived processes that must ride out Redis restarts (BullMQ requires
 * `maxRetriesPerRequest: null` for workers). `producer`: the CLI and other short-lived callers,
 * which should fail fast instead of queueing commands while Redis is away.
 */
export type RedisRole = 'worker' | 'producer';

export interface RedisConnectionOptions {
  /** Shown in `CLIENT LIST`; helps tell workers apart. */
  connectionName?: string;
}

/**
 * One ioredis connection for BullMQ. Keys are namespaced with BullMQ's `prefix` option, never
 * ioredis `keyPrefix` (BullMQ's Lua scripts build keys themselves and would miss it).
 */
export function createRedisConnection(env: Pick<HatEnv, 'REDIS_URL'>, role: RedisRole, options: RedisConnectionOptions = {}): Redis {
  const common: RedisOptions = { connectionName: options.connectionName, lazyConnect: false };
  const roleOptions: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          connectTimeout: 5_000,
          // A few quick reconnects, then give up so a command reports the outage instead of hanging.
          retryStrategy: (times: number) => (times > 3 ? null : times * 200),
        };
  const connection = new Redis(env.REDIS_URL, { ...common, ...roleOptions });
  // Without a listener ioredis prints every reconnect error; callers see failures through commands.
  connection.on('error', () => undefined);
  return connection;
}

/**
 * Waits until the connection is ready, or throws `REDIS_UNAVAILABLE` naming the URL and what to
 * do. Producers call this first so a stopped Redis gives one clear line, not a stack trace.
 */
export async function waitForRedis(connection: Redis, url: string, timeoutMs = 5_000): Promise<void> {
  if (connection.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const fail = (reason: string) => {
      cleanup();
      reject(new HatError('REDIS_UNAVAILABLE', `cannot reach Redis at ${redactUrl(url)} (${reason}); start Redis or set REDIS_URL`));
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
export async function closeRedisConnection(connection: Redis): Promise<void> {
  if (connection.status === 'end') return;
  try {
    await connection.quit();
  } catch {
    connection.disconnect();
  }
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}
