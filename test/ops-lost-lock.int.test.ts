import { Queue } from 'bullmq';
import { closeRedisConnection, createRedisConnection } from '../queues/bullmq/redis-connection';
import { createQueueWorker, lostLockJobId } from '../queues/bullmq/worker-factory';
import { loggerInto } from './support/captured-logger';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * Issue #37: a worker resumed after a pause longer than its lock (a stopped container, a long GC)
 * finds its part handed to another worker. It says so in one line, not in raw BullMQ errors.
 */
describe('a worker that lost its lock', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  it('logs one line per job: handed to another worker, nothing lost (no "Missing lock" / "could not renew lock" errors)', async () => {
    const name = 'lost-lock';
    const queue = new Queue(name, { connection: kit.context.connection, prefix: kit.prefix });
    let logged = '';
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    const connection = createRedisConnection(kit.env, 'worker', { connectionName: 'lost-lock-test' });
    const worker = createQueueWorker(
      name,
      async () => {
        started = true;
        await released;
        return 'done';
      },
      {
        connection,
        prefix: kit.prefix,
        concurrency: 1,
        lockDurationMs: 1_000,
        logger: loggerInto((text) => (logged += text)),
      },
    );
    try {
      await queue.add('part', { runId: 'r' }, { jobId: 'part.1' });
      await waitFor(async () => started, 10_000, 20);
      // What the stalled checker does for another worker once the lock lapsed: the lock is gone.
      await kit.context.connection.del(`${kit.prefix}:${name}:part.1:lock`);
      await waitFor(async () => logged.includes('handed to another worker'), 10_000, 50);
      // The paused work finishes after all: finishing it fails for want of the lock, said once.
      release();
      await waitFor(async () => (await queue.getJobState('part.1')) === 'active', 5_000, 50);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    } finally {
      await worker.close(true);
      await queue.close();
      await closeRedisConnection(connection);
    }
    const lines = logged
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { level: number; msg: string; jobId?: string });
    const handedOver = lines.filter((line) => line.msg.includes('handed to another worker'));
    expect(handedOver).toHaveLength(1);
    expect(handedOver[0]).toMatchObject({ level: 40, jobId: 'part.1' });
    expect(handedOver[0].msg).toMatch(
      /^job part\.1 of lost-lock was handed to another worker while this one was paused past its lock \(.*\); nothing was lost/,
    );
    expect(lines.filter((line) => line.msg === 'worker error')).toEqual([]);
  });

  it("reads the job id out of both of BullMQ's lost-lock errors, dots included", () => {
    expect(lostLockJobId(new Error('Missing lock for job run.1:collect:part-00003. moveToFinished'))).toBe(
      'run.1:collect:part-00003',
    );
    expect(lostLockJobId(new Error('could not renew lock for job run.1:collect'))).toBe('run.1:collect');
    expect(lostLockJobId(new Error('Connection is closed.'))).toBeUndefined();
  });
});
