import { readManifest } from '../shared/artifacts/manifest';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { startHat, type HatProcess } from './support/hat-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/** `hat worker` as a real process: graceful, bounded shutdown on SIGTERM. */
describe('hat worker shutdown (spawned CLI)', () => {
  let kit: QueueTestKit;
  let worker: HatProcess | undefined;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    if (worker && worker.child.exitCode === null) worker.child.kill('SIGKILL');
    await worker?.exited;
    worker = undefined;
    await kit.cleanup();
  });

  const spawnWorker = (shutdownTimeoutMs: number) =>
    startHat(['worker', '--stages', 'fanout-demo', '--concurrency', '1'], {
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
      HAT_SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs),
      HAT_LOG_LEVEL: 'info',
    });
  const activePart = () =>
    waitFor(
      async () => (await kit.context.queue('fanout-demo').getActive()).find((job) => job.name === 'part'),
      20_000,
      50,
    );

  it('hands a job that cannot finish in time back to the queue, exits within the bound, and a second worker completes the run', async () => {
    worker = spawnWorker(1_000);
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'handback', stages: { 'fanout-demo': { parts: 2, partDelayMs: 4_000 } } },
        { env: kit.env, now: new Date() },
      ),
    );
    const active = await activePart();

    const signalledAt = Date.now();
    worker.child.kill('SIGTERM');
    const exit = await worker.exited;
    const elapsed = Date.now() - signalledAt;
    expect(exit.code).toBe(0);
    expect(elapsed).toBeLessThan(1_000 + 2_500);
    expect(exit.stderr).toContain('shut down after handing active jobs back');

    // Back in the wait list at once, without spending an attempt.
    expect(await kit.context.queue('fanout-demo').getJobState(active.id ?? '')).toBe('waiting');
    expect((await kit.context.queue('fanout-demo').getJob(active.id ?? ''))?.attemptsMade).toBe(0);

    await kit.startWorkers({ queues: ['fanout-demo', 'runs'], concurrency: 2 });
    const status = await watchRun(kit.context, 'handback', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    expect((await readManifest(kit.store, 'runs/handback/fanout-demo/manifest.json')).objects).toHaveLength(2);
  });

  it('lets a job that fits in the bound finish before exiting', async () => {
    worker = spawnWorker(10_000);
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'finish', stages: { 'fanout-demo': { parts: 1, partDelayMs: 1_500 } } },
        { env: kit.env, now: new Date() },
      ),
    );
    const active = await activePart();

    const signalledAt = Date.now();
    worker.child.kill('SIGTERM');
    const exit = await worker.exited;
    expect(exit.code).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
    expect(exit.stderr).toContain('shut down cleanly');
    const finished = await kit.context.queue('fanout-demo').getJob(active.id ?? '');
    expect(await finished?.getState()).toBe('completed');
    expect(finished?.attemptsMade).toBe(1);
    expect(await kit.store.head('runs/finish/fanout-demo/part-00000.jsonl.gz')).toBeDefined();
  });
});
