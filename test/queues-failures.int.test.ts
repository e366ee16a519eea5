import { z } from 'zod';
import { BadInputError } from '../shared/errors';
import { defineStage } from '../queues/stage-kit/define-stage';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { runManifestKey } from '../queues/runs/run-layout';
import { cancelRun, getRunStatus, retryRun, watchRun } from '../queues/runs/run-control';
import { registerStage, unregisterStage } from '../queues/stage-kit/stage-registry';
import { stageJobOptions } from '../queues/bullmq/job-options';
import { runManifestSchema } from '../workers/run/run-manifest';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/** Retries, permanent failures, size limits, `runs retry` and `runs cancel` through real Redis. */
describe('failures, retries and cancellation', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  const plan = (config: unknown) => planRun(config, { env: kit.env, now: new Date() });
  const readRunManifest = async (runId: string) =>
    runManifestSchema.parse(JSON.parse((await kit.store.getBuffer(runManifestKey(runId))).toString()));
  const partJob = async (runId: string, index: number) => {
    const jobs = await kit.context
      .queue('fanout-demo')
      .getJobs(['completed', 'failed', 'waiting', 'active', 'delayed']);
    return jobs.find((job) => job.name === 'part' && job.data.runId === runId && job.data.index === index);
  };

  it('retries a part that throws a TransientError on its first attempt, and the run completes', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'] });
    await enqueueRun(
      kit.context,
      plan({ runId: 'flaky', stages: { 'fanout-demo': { parts: 5, faults: { transientOnFirstAttempt: [3] } } } }),
    );
    const status = await watchRun(kit.context, 'flaky', { intervalMs: 100 });
    expect(status.state).toBe('completed');

    const retried = await partJob('flaky', 3);
    expect(retried?.attemptsMade).toBe(2);
    expect(retried?.stacktrace).toHaveLength(1);
    expect(retried?.stacktrace?.[0]).toContain('[DEMO_TRANSIENT]');
    expect((await partJob('flaky', 2))?.attemptsMade).toBe(1);
    expect(await kit.store.head('runs/flaky/fanout-demo/part-00003.jsonl.gz')).toBeDefined();
    expect((await readRunManifest('flaky')).status).toBe('completed');
  });

  it('fails a part with bad input once, with its [CODE] message, writing nothing for it', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'] });
    await enqueueRun(
      kit.context,
      plan({ runId: 'bad', stages: { 'fanout-demo': { parts: 4, faults: { badInput: [1] } } } }),
    );
    const status = await watchRun(kit.context, 'bad', { intervalMs: 100 });

    expect(status.state).toBe('failed');
    expect(status.error).toMatch(
      /^\[RUN_FAILED\] run bad: 1 of 1 stage\(s\) did not complete \(fanout-demo failed: \[DEMO_BAD_PART\] part 1 of fanout-demo/,
    );
    const bad = await partJob('bad', 1);
    expect(bad?.attemptsMade).toBe(1);
    expect(bad?.failedReason).toMatch(/^\[DEMO_BAD_PART\] part 1 of fanout-demo has input marked bad/);
    expect(await kit.store.head('runs/bad/fanout-demo/part-00001.jsonl.gz')).toBeUndefined();
    expect(await kit.store.head('runs/bad/fanout-demo/_state/part-00001.json')).toBeUndefined();
    expect(await kit.store.head('runs/bad/fanout-demo/manifest.json')).toBeUndefined();

    const manifest = await readRunManifest('bad');
    expect(manifest.status).toBe('failed');
    expect(manifest.stages[0]).toMatchObject({ name: 'fanout-demo', status: 'failed', parts: 4 });
    expect(manifest.stages[0]?.error).toMatch(
      /^\[DEMO_BAD_PART\] .* \(job fanout-demo\/bad\.fanout-demo\.part-00001\./,
    );
  });

  it('fails a stage job whose input does not match its schema once, and writes nothing', async () => {
    await kit.startWorkers({ queues: ['fanout-demo'] });
    const job = await kit.context.queue('fanout-demo').add(
      'stage',
      {
        v: 1,
        runId: 'raw',
        stage: 'fanout-demo',
        seed: '0',
        artifactsRoot: kit.artifactsRoot,
        outputPrefix: 'runs/raw/fanout-demo/',
        input: { parts: 'many' },
        inputHash: 'x',
      },
      { ...stageJobOptions({ attempts: 3, backoffMs: 10 }, kit.env.HAT_JOB_DATA_LIMIT), jobId: 'raw.fanout-demo.x' },
    );
    await waitFor(async () => (await kit.context.queue('fanout-demo').getJobState(job.id ?? '')) === 'failed');
    const failed = await kit.context.queue('fanout-demo').getJob(job.id ?? '');
    if (!failed) throw new Error('the failed job is gone');
    expect(failed.attemptsMade).toBe(1);
    expect(failed.failedReason).toMatch(
      /^\[STAGE_INPUT_INVALID\] the config of stage "fanout-demo" is invalid.*\n.*input\.parts/,
    );
    const written = [];
    for await (const object of kit.store.list('runs/raw/')) written.push(object);
    expect(written).toEqual([]);
  });

  it('refuses job data over HAT_JOB_DATA_LIMIT before enqueueing anything', async () => {
    const small = await createQueueTestKit({ HAT_JOB_DATA_LIMIT: '600' });
    try {
      const big = planRun(
        {
          runId: 'big',
          stages: {
            noop: {
              label: 'x'.repeat(180),
              inputs: Array.from({ length: 4 }, (_, index) => `file:///data/${'y'.repeat(60)}/${index}`),
            },
          },
        },
        { env: small.env, now: new Date() },
      );
      const error = await enqueueRun(small.context, big).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(BadInputError);
      expect((error as BadInputError).message).toMatch(
        /^\[JOB_DATA_TOO_LARGE\] job data for stage "noop" \(job big\.noop\.[0-9a-f]+\) is \d+ bytes, over the limit of 600 bytes \(HAT_JOB_DATA_LIMIT\)/,
      );
      expect(await small.context.runsQueue.getJobCounts()).toEqual(
        expect.objectContaining({ waiting: 0, 'waiting-children': 0 }),
      );
      expect(await small.context.queue('noop').count()).toBe(0);
    } finally {
      await small.cleanup();
    }
  });

  describe('hat runs retry', () => {
    const calls = new Map<number, number>();
    let brokenParts = new Set<number>();
    const retryDemo = defineStage({
      name: 'retry-test',
      description: 'test stage: parts listed in brokenParts fail with bad input until the set is cleared',
      input: z.object({ parts: z.number().int().positive() }),
      output: z.object({ done: z.array(z.number()) }),
      partInput: z.object({ index: z.number().int() }),
      partOutput: z.object({ index: z.number().int() }),
      queue: { attempts: 2, backoffMs: 10 },
      plan: (input) => Array.from({ length: input.parts }, (_, index) => ({ index })),
      createProcessor: () => async (part) => {
        calls.set(part.index, (calls.get(part.index) ?? 0) + 1);
        if (brokenParts.has(part.index)) throw new BadInputError('TEST_BROKEN', `part ${part.index} is broken`);
        return { index: part.index };
      },
      finish: async (_input, parts) => ({ done: parts.map((part) => part.index) }),
    });
    beforeAll(() => registerStage(retryDemo));
    afterAll(() => unregisterStage('retry-test'));

    it('re-runs only the failed parts, then the stage and the run', async () => {
      calls.clear();
      brokenParts = new Set([2, 4]);
      await kit.startWorkers({ queues: ['retry-test', 'runs'] });
      await enqueueRun(kit.context, plan({ runId: 'retry', stages: { 'retry-test': { parts: 6 } } }));
      expect((await watchRun(kit.context, 'retry', { intervalMs: 100 })).state).toBe('failed');
      expect((await readRunManifest('retry')).status).toBe('failed');

      brokenParts = new Set();
      const result = await retryRun(kit.context, 'retry');
      expect(result).toEqual({ runId: 'retry', retriedParts: 2, retriedStages: ['retry-test'] });
      const status = await watchRun(kit.context, 'retry', { intervalMs: 100 });
      expect(status.state).toBe('completed');
      expect([...calls.entries()].sort(([left], [right]) => left - right)).toEqual([
        [0, 1],
        [1, 1],
        [2, 2],
        [3, 1],
        [4, 2],
        [5, 1],
      ]);
      const stageJob = await kit.context.queue('retry-test').getJob(status.stages[0]?.jobId ?? '');
      expect(stageJob?.returnvalue.output).toEqual({ done: [0, 1, 2, 3, 4, 5] });
      expect((await readRunManifest('retry')).status).toBe('completed');
      await expect(retryRun(kit.context, 'retry')).rejects.toThrow(/\[RUN_NOT_FAILED\] run retry is completed/);
    });
  });

  it('cancels a run: removes waiting parts, lets running ones end, and records the run as cancelled', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'], concurrency: 2 });
    await enqueueRun(kit.context, plan({ runId: 'stop', stages: { 'fanout-demo': { parts: 12, partDelayMs: 800 } } }));
    await waitFor(async () => (await kit.context.queue('fanout-demo').getActiveCount()) >= 2);
    const cancelled = await cancelRun(kit.context, 'stop', Date.now());
    expect(cancelled.runId).toBe('stop');

    const status = await watchRun(kit.context, 'stop', { intervalMs: 100 });
    expect(status.state).toBe('cancelled');
    expect(status.error).toMatch(/^\[RUN_CANCELLED\] run stop was cancelled/);
    const parts = (
      await kit.context.queue('fanout-demo').getJobs(['completed', 'waiting', 'delayed', 'active', 'failed'])
    ).filter((job) => job.name === 'part');
    expect(parts.length).toBeLessThan(12);
    expect(await kit.context.queue('fanout-demo').getWaitingCount()).toBe(0);
    expect(await kit.store.head('runs/stop/fanout-demo/manifest.json')).toBeUndefined();
    const manifest = await readRunManifest('stop');
    expect(manifest.status).toBe('cancelled');
    expect(manifest.stages[0]?.status).toBe('cancelled');
    await expect(cancelRun(kit.context, 'stop', Date.now())).rejects.toThrow(/\[RUN_FINISHED\]/);
    expect((await getRunStatus(kit.context, 'stop')).state).toBe('cancelled');
  });
});
