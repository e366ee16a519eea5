import { Queue } from 'bullmq';
import { closeRedisConnection, createRedisConnection } from '../queues/bullmq/redis-connection';
import { createQueueWorker, lostLockJobId } from '../queues/bullmq/worker-factory';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { getRunStatus } from '../queues/runs/run-control';
import { describeStage, progressLines } from '../cli/run-progress';
import { loggerInto } from './support/captured-logger';
import { startHat, type HatProcess } from './support/hat-process';
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

/** Issue #37: while a killed worker's part waits for the stall check, the watcher says it is stalled. */
describe('a part whose worker was killed', () => {
  let kit: QueueTestKit;
  let worker: HatProcess | undefined;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    if (worker && worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
    await worker?.exited;
    await kit.cleanup();
  });

  it('shows as stalled in hat runs show and hat run --wait until another worker takes it', async () => {
    // A short lock and a long stall check: the lock lapses at once, the hand-back waits a minute.
    worker = startHat(['worker', '--stages', 'fanout-demo,runs', '--concurrency', '1'], {
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
      HAT_LOG_LEVEL: 'warn',
      HAT_LOCK_DURATION_MS: '1000',
      HAT_STALLED_INTERVAL_MS: '60000',
    });
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'stalled', stages: { 'fanout-demo': { parts: 2, partDelayMs: 20_000 } } },
        { env: kit.env, now: new Date() },
      ),
    );
    await waitFor(
      async () => (await kit.context.queue('fanout-demo').getActive()).find((job) => job.name === 'part'),
      20_000,
      20,
    );
    const before = await getRunStatus(kit.context, 'stalled');
    expect(before.stages[0].partsStalled).toBeUndefined();
    worker.child.kill('SIGKILL');
    await worker.exited;
    const status = await waitFor(async () => {
      const current = await getRunStatus(kit.context, 'stalled');
      return current.stages[0].partsStalled ? current : undefined;
    }, 10_000);
    expect(status.stages[0]).toMatchObject({ name: 'fanout-demo', state: 'running', partsStalled: 1 });
    expect(describeStage(progressLines(status)[0], {})).toMatch(
      /^fanout-demo: running, 0\/2 parts, 1 part stalled \(its worker stopped; handed to another worker within the stalled interval\)/,
    );
  }, 60_000);
});
