import { FlowProducer, Queue } from 'bullmq';
import type { HatEnv } from '../../shared/config/env';
import { eventsMaxLength } from './job-options';
import { runsQueueName } from '../stage-kit/stage-names';
import {
  closeRedisConnection,
  createRedisConnection,
  waitForRedis,
  type RedisClient,
  type RedisRole,
} from './redis-connection';

/**
 * The queues of one prefix over one Redis connection: what the CLI, workers and tests share.
 * Every queue of a run (stages and `runs`) lives under the same prefix, so a hash-tagged prefix
 * such as `{hat}` keeps a whole flow in one Redis Cluster slot.
 */
export interface QueueContext {
  readonly env: HatEnv;
  /** BullMQ key prefix (HAT_REDIS_PREFIX). */
  readonly prefix: string;
  /** One Redis or a Redis Cluster (REDIS_CLUSTER_NODES). */
  readonly connection: RedisClient;
  /** The queue of a stage (or `runs`), created on first use. */
  queue(name: string): Queue;
  readonly runsQueue: Queue;
  readonly flowProducer: FlowProducer;
  /** Closes the queues and, when this context opened it, the connection. */
  close(): Promise<void>;
}

export interface QueueContextOptions {
  /** Use this connection instead of opening one (it is not closed by `close()`). */
  connection?: RedisClient;
  /** Whose connection this is when one is opened. Default `producer`. */
  role?: RedisRole;
  connectionName?: string;
}

/** Opens a context and checks that Redis answers (REDIS_UNAVAILABLE otherwise). */
export async function openQueueContext(env: HatEnv, options: QueueContextOptions = {}): Promise<QueueContext> {
  const ownsConnection = options.connection === undefined;
  const connection =
    options.connection ??
    createRedisConnection(env, options.role ?? 'producer', { connectionName: options.connectionName });
  try {
    await waitForRedis(connection, env.REDIS_CLUSTER_NODES ?? env.REDIS_URL);
  } catch (error) {
    if (ownsConnection) connection.disconnect();
    throw error;
  }
  const prefix = env.HAT_REDIS_PREFIX;
  const queues = new Map<string, Queue>();
  const queue = (name: string): Queue => {
    let existing = queues.get(name);
    if (!existing) {
      existing = new Queue(name, { connection, prefix, streams: { events: { maxLen: eventsMaxLength } } });
      // Errors surface through the calls that hit them; this only keeps them from being unhandled.
      existing.on('error', () => undefined);
      queues.set(name, existing);
    }
    return existing;
  };
  const flowProducer = new FlowProducer({ connection, prefix });
  flowProducer.on('error', () => undefined);
  let closing: Promise<void> | undefined;
  return {
    env,
    prefix,
    connection,
    queue,
    get runsQueue() {
      return queue(runsQueueName);
    },
    flowProducer,
    close() {
      closing ??= (async () => {
        await Promise.allSettled([...queues.values()].map((item) => item.close()));
        await flowProducer.close().catch(() => undefined);
        if (ownsConnection) await closeRedisConnection(connection);
      })();
      return closing;
    },
  };
}
