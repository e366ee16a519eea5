import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { closeRedisConnection, createRedisConnection } from '../queues/bullmq/redis-connection';
import { createQueueWorker, lostLockJobId } from '../queues/bullmq/worker-factory';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { getRunStatus, watchRun } from '../queues/runs/run-control';
import { loggerInto } from './support/captured-logger';
import { runHat, startHat, type HatProcess } from './support/hat-process';
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

  it("reads the job id out of each of BullMQ's lost-lock errors, dots included", () => {
    expect(lostLockJobId(new Error('Missing lock for job run.1:collect:part-00003. moveToFinished'))).toBe(
      'run.1:collect:part-00003',
    );
    expect(lostLockJobId(new Error('could not renew lock for job run.1:collect'))).toBe('run.1:collect');
    expect(
      lostLockJobId(
        new Error('Lock mismatch for job run.1.collect.part-00003.0123456789ab. Cmd moveToFinished from active'),
      ),
    ).toBe('run.1.collect.part-00003.0123456789ab');
    expect(lostLockJobId(new Error('Connection is closed.'))).toBeUndefined();
  });
});

/** The JSON log lines of a process's stderr. */
function logLines(stderr: string): Array<{ level: number; msg: string; part?: string; jobId?: string }> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string; part?: string; jobId?: string });
}

/** Real worker processes, stopped, killed and resumed. */
describe('worker processes killed or paused mid-part', () => {
  let kit: QueueTestKit;
  let directory: string;
  const processes: HatProcess[] = [];
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-lost-lock-'));
  });
  afterEach(async () => {
    for (const hat of processes.splice(0)) {
      if (hat.child.exitCode === null && hat.child.signalCode === null) {
        hat.child.kill('SIGCONT');
        hat.child.kill('SIGKILL');
      }
      await hat.exited;
    }
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const start = (args: string[], env: Record<string, string>): HatProcess => {
    const hat = startHat(args, { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, ...env });
    processes.push(hat);
    return hat;
  };
  const activePart = (queue = 'fanout-demo') =>
    waitFor(async () => (await kit.context.queue(queue).getActive()).find((job) => job.name === 'part'), 30_000, 20);

  it('a SIGKILLed worker: hat run --wait and hat runs show name the part as stalled (worker lost) at once, long before its lock lapses, and say when it is retried', async () => {
    // A one-minute lock: a lock renewed every quarter lock still has 30 s or more left when the
    // worker dies, so a stall seen before that is seen from the worker's closed connection.
    const env = { HAT_LOG_LEVEL: 'warn', HAT_LOCK_DURATION_MS: '60000', HAT_STALLED_INTERVAL_MS: '1000' };
    const first = start(['worker', '--stages', 'fanout-demo,runs', '--concurrency', '1'], env);
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      ['runId: killed-worker', 'stages:', '  fanout-demo: { parts: 2, partDelayMs: 8000 }', ''].join('\n'),
    );
    const watching = start(['run', config, '--wait'], env);
    const part = await activePart();
    const lockKey = `${kit.prefix}:fanout-demo:${part.id ?? ''}:lock`;
    first.child.kill('SIGKILL');
    await first.exited;

    // No worker serves the queue now: nothing will hand the part back until one starts.
    const unserved =
      /^fanout-demo: running, 0\/2 parts, part-0000[01] stalled \(worker lost\), not retried until a worker serves fanout-demo, \? parts\/s, ETA \?$/m;
    await waitFor(async () => unserved.test(watching.stderr()), 30_000, 100);
    expect(await kit.context.connection.pttl(lockKey)).toBeGreaterThan(0);
    const shown = await runHat(['runs', 'show', 'killed-worker'], {
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
    });
    expect(shown.stdout).toMatch(
      /^ {2}fanout-demo: running, 0\/2 parts, part-0000[01] stalled \(worker lost\), not retried until a worker serves fanout-demo$/m,
    );

    // With a worker serving the queue again, the part waits out what is left of its lock, then one stall check.
    start(['worker', '--stages', 'fanout-demo,runs', '--concurrency', '2'], env);
    const retried =
      /^fanout-demo: running, 0\/2 parts, part-0000[01] stalled \(worker lost\), retried in ~(\d+) s, \? parts\/s, ETA \?$/m;
    const seconds = await waitFor(async () => retried.exec(watching.stderr())?.[1], 30_000, 100);
    expect(Number(seconds)).toBeGreaterThanOrEqual(1);
    expect(Number(seconds)).toBeLessThanOrEqual(62);
    const status = await getRunStatus(kit.context, 'killed-worker');
    expect(status.stages[0].stalled).toEqual([
      expect.objectContaining({
        jobId: part.id,
        part: part.id?.split('.')[2],
        cause: 'worker-lost',
        worker: part.processedBy,
      }),
    ]);
    expect(await kit.context.connection.pttl(lockKey)).toBeGreaterThan(0);

    // What the lock lapsing does, without waiting out the minute: the next stall check hands the part back.
    await kit.context.connection.del(lockKey);
    const done = await watching.exited;
    expect(done.code).toBe(0);
    expect(done.stderr).toMatch(/run killed-worker completed in/);
    expect((await kit.context.queue('fanout-demo').getJob(part.id ?? ''))?.stalledCounter).toBe(1);
  }, 120_000);

  it.each([
    // In-process: the part sleeps, then writes its records and its marker.
    ['fanout-demo', { parts: 1, partDelayMs: 4000 }, ['part-00000.jsonl.gz', '_state/part-00000.json']],
    // Sandboxed (a worker thread, as shard and augment run): the part hashes, then writes its
    // marker, which names the thread that ran it, so the two workers' bytes differ.
    ['hash-demo', { parts: 1, rounds: 1_500_000 }, ['_state/part-00000.json']],
  ])(
    'a %s worker paused past its lock (SIGSTOP) and resumed: one warn line naming the part, and it writes none of the outputs the other worker wrote',
    async (stage, config, outputs) => {
      const env = { HAT_LOG_LEVEL: 'warn', HAT_LOCK_DURATION_MS: '2000', HAT_STALLED_INTERVAL_MS: '1000' };
      const paused = start(['worker', '--stages', `${stage},runs`, '--concurrency', '1'], env);
      await enqueueRun(
        kit.context,
        planRun({ runId: 'resumed', stages: { [stage]: config } }, { env: kit.env, now: new Date() }),
      );
      const part = await activePart(stage);
      paused.child.kill('SIGSTOP');
      // Once its lock lapses, the part shows as stalled; the stopped worker runs no stall check either.
      const shown = await waitFor(async () => {
        const result = await runHat(['runs', 'show', 'resumed'], {
          HAT_REDIS_PREFIX: kit.prefix,
          HAT_ARTIFACTS: kit.artifactsRoot,
        });
        return result.stdout.includes('stalled') ? result.stdout : undefined;
      }, 30_000);
      expect(shown).toMatch(
        new RegExp(
          `^ {2}${stage}: running, 0/1 parts, part-00000 stalled \\(its worker stopped renewing the lock: paused or hung\\), not retried until a worker serves ${stage}$`,
          'm',
        ),
      );

      // Another worker takes the part once the paused one's lock lapses, and finishes the run.
      start(['worker', '--stages', `${stage},runs`, '--concurrency', '1'], env);
      const status = await watchRun(kit.context, 'resumed', { intervalMs: 200 });
      expect([status.state, status.error]).toEqual(['completed', undefined]);
      const identity = async () =>
        Promise.all(
          outputs.map(async (key) => {
            const info = await stat(join(kit.artifactsDirectory, `runs/resumed/${stage}`, key));
            return [key, info.ino, info.mtimeMs];
          }),
        );
      const before = await identity();

      // Resumed: its part's work is done, and it would write the part's objects now.
      paused.child.kill('SIGCONT');
      await waitFor(async () => paused.stderr().includes('handed to another worker'), 30_000, 50);
      paused.child.kill('SIGTERM');
      const exited = await paused.exited;
      expect(await identity()).toEqual(before);

      const lines = logLines(exited.stderr);
      const handedOver = lines.filter((line) => line.msg.includes('handed to another worker'));
      expect(handedOver).toHaveLength(1);
      expect(handedOver[0]).toMatchObject({ level: 40, part: 'part-00000', jobId: part.id });
      expect(handedOver[0].msg).toMatch(
        new RegExp(
          `^part-00000 \\(job resumed\\.${stage}\\.part-00000\\.[0-9a-f]{12}\\) of ${stage} was handed to another worker while this one was paused past its lock \\(.+\\); nothing was lost: the other worker runs it, and this worker stopped it without writing its outputs$`,
        ),
      );
      expect(lines.filter((line) => line.level >= 50)).toEqual([]);
      // The other worker ran it (each worker has its own name).
      const taken = await kit.context.queue(stage).getJob(part.id ?? '');
      expect(taken?.processedBy).not.toBe(part.processedBy);
    },
    120_000,
  );
});
