import { readManifest } from '../shared/artifacts/manifest';
import { enqueueRun } from '../queues/runs/flows';
import { compactUtc } from '../queues/stage-kit/job-ids';
import { scheduledAtOf, setSchedule } from '../queues/runs/job-scheduler';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

describe('scheduled kickoffs and sandboxed stages', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  it('a scheduled kickoff starts one run whose id comes from the scheduled time; a retried kickoff starts nothing', async () => {
    await setSchedule(
      kit.context,
      { name: 'minutely', cron: '* * * * *', tz: 'Europe/Berlin', config: { stages: { 'fanout-demo': { parts: 2 } } } },
      kit.env,
      new Date(),
    );
    const [kickoff] = await kit.context.runsQueue.getDelayed();
    if (!kickoff) throw new Error('the scheduler added no kickoff job');
    expect(kickoff.name).toBe('kickoff');
    const due = scheduledAtOf(kickoff);
    expect(due.getUTCSeconds()).toBe(0);
    const runId = `minutely-${compactUtc(due)}`;

    await kickoff.promote();
    await kit.startWorkers({ queues: ['runs'] });
    // Judge completion from one snapshot of the job: a state read after the fetch can see
    // 'completed' while the fetched copy still lacks its return value.
    const finished = async () => {
      const job = await kit.context.runsQueue.getJob(kickoff.id ?? '');
      return job?.finishedOn && !job.failedReason ? job : undefined;
    };
    const done = await waitFor(finished);
    expect(done?.returnvalue).toEqual({ kind: 'kickoff', runId, enqueued: true });
    const run = await kit.context.runsQueue.getJob(runId);
    expect(run?.data).toMatchObject({
      runId,
      source: 'schedule:minutely',
      stages: [expect.objectContaining({ name: 'fanout-demo' })],
    });

    await done?.retry('completed');
    const again = await waitFor(async () => {
      const job = await finished();
      return job?.returnvalue?.enqueued === false ? job : undefined;
    });
    expect(again.returnvalue).toEqual({ kind: 'kickoff', runId, enqueued: false });
    const runs = (
      await kit.context.runsQueue.getJobs(['waiting-children', 'waiting', 'active', 'completed', 'failed'])
    ).filter((job) => job.name === 'run');
    expect(runs.map((job) => job.id)).toEqual([runId]);
  });

  it('runs a CPU-heavy stage in sandboxed worker threads, so busy parts keep their locks', async () => {
    // Each part computes for longer than the lock lasts; only renewals from a free event loop keep it.
    const pool = await kit.startWorkers({ queues: ['hash-demo', 'runs'], sandbox: 'auto', lockDurationMs: 2_000 });
    expect(pool.sandboxed).toEqual(['hash-demo']);
    const stalled: string[] = [];
    for (const worker of pool.workers) worker.on('stalled', (jobId) => stalled.push(jobId));

    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'cpu', stages: { 'hash-demo': { parts: 2, rounds: 600_000 } } },
        { env: kit.env, now: new Date() },
      ),
    );
    const status = await watchRun(kit.context, 'cpu', { intervalMs: 200 });
    expect([status.state, status.error, status.stages[0]?.error]).toEqual(['completed', undefined, undefined]);

    const parts = (await kit.context.queue('hash-demo').getCompleted()).filter((job) => job.name === 'part');
    expect(parts).toHaveLength(2);
    for (const part of parts) {
      expect(part.returnvalue.output.threadId).toBeGreaterThan(0);
      expect(part.attemptsStarted).toBe(1);
    }
    expect(stalled).toEqual([]);
    expect(
      (await readManifest(kit.store, 'runs/cpu/hash-demo/manifest.json')).objects.map((object) => object.key),
    ).toEqual(['runs/cpu/hash-demo/digests.jsonl.gz']);
  });

  /** The worker_threads ids the parts of a fresh hash-demo run ran on. */
  async function threadsOfRun(runId: string): Promise<number[]> {
    await enqueueRun(
      kit.context,
      planRun({ runId, stages: { 'hash-demo': { parts: 2, rounds: 1_000 } } }, { env: kit.env, now: new Date() }),
    );
    expect((await watchRun(kit.context, runId, { intervalMs: 100 })).state).toBe('completed');
    const parts = (await kit.context.queue('hash-demo').getCompleted()).filter(
      (job) => job.name === 'part' && job.data.runId === runId,
    );
    expect(parts).toHaveLength(2);
    return parts.map((part) => part.returnvalue.output.threadId as number);
  }

  it('ends sandbox threads idle for HAT_SANDBOX_IDLE_MS (their memory goes back to the system) and starts new ones for the next run', async () => {
    await kit.startWorkers({
      queues: ['hash-demo', 'runs'],
      sandbox: 'auto',
      env: { ...kit.env, HAT_SANDBOX_IDLE_MS: 300 },
    });
    const first = await threadsOfRun('idle-1');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const second = await threadsOfRun('idle-2');
    expect(first.every((thread) => thread > 0)).toBe(true);
    expect(Math.min(...second)).toBeGreaterThan(Math.max(...first));
  });

  it('keeps sandbox threads for the next run with HAT_SANDBOX_IDLE_MS=0', async () => {
    await kit.startWorkers({
      queues: ['hash-demo', 'runs'],
      sandbox: 'auto',
      env: { ...kit.env, HAT_SANDBOX_IDLE_MS: 0 },
    });
    const first = await threadsOfRun('kept-1');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const second = await threadsOfRun('kept-2');
    expect(new Set([...first, ...second]).size).toBeLessThanOrEqual(2);
  });
});
