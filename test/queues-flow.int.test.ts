import { readManifest } from '../shared/artifacts/manifest';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { buildRunFlow, enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { runManifestKey, runReportKeys } from '../queues/runs/run-layout';
import { getRunStatus, watchRun } from '../queues/runs/run-control';
import { runManifestSchema } from '../workers/run/run-manifest';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/** Flows through real Redis: fan-out/fan-in, idempotent re-enqueue, chaining, the run manifest. */
describe('run flows', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  const plan = (config: unknown, now = new Date('2025-01-31T02:00:00Z')) => planRun(config, { env: kit.env, now });

  async function jobCounts() {
    const counts: Record<string, Record<string, number>> = {};
    for (const name of ['runs', 'fanout-demo', 'noop']) counts[name] = await kit.context.queue(name).getJobCounts();
    return counts;
  }

  it('fans a stage out into 50 part jobs and back in, writing the manifest last', async () => {
    const runPlan = plan({ runId: 'fan50', stages: { 'fanout-demo': { parts: 50, recordsPerPart: 3 } } });
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'], concurrency: 8 });
    expect(await enqueueRun(kit.context, runPlan)).toEqual({ runId: 'fan50', enqueued: true });
    const status = await watchRun(kit.context, 'fan50', { intervalMs: 100 });

    expect(status.state).toBe('completed');
    expect(status.stages).toEqual([
      expect.objectContaining({ name: 'fanout-demo', state: 'completed', partsDone: 50, partsTotal: 50 }),
    ]);

    const manifestKey = 'runs/fan50/fanout-demo/manifest.json';
    const manifest = await readManifest(kit.store, manifestKey);
    expect(manifest.objects).toHaveLength(50);
    expect(manifest.objects.map((object) => object.key)).toEqual(
      Array.from(
        { length: 50 },
        (_, index) => `runs/fan50/fanout-demo/part-${String(index).padStart(5, '0')}.jsonl.gz`,
      ),
    );
    expect(manifest.objects.every((object) => object.records === 3)).toBe(true);
    const records = [];
    for await (const record of readJsonl(kit.store, 'runs/fan50/fanout-demo/part-00049.jsonl.gz')) records.push(record);
    expect(records).toHaveLength(3);

    // The stage manifest comes after every part object; the run manifest after everything.
    const manifestAt = kit.putOrder.indexOf(manifestKey);
    const partPositions = manifest.objects.map((object) => kit.putOrder.indexOf(object.key));
    expect(Math.max(...partPositions)).toBeLessThan(manifestAt);
    expect(kit.putOrder[kit.putOrder.length - 1]).toBe(runManifestKey('fan50'));

    const runManifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer(runManifestKey('fan50'))).toString()),
    );
    expect(runManifest).toMatchObject({ runId: 'fan50', status: 'completed' });
    expect(runManifest.stages).toEqual([
      expect.objectContaining({
        name: 'fanout-demo',
        status: 'completed',
        parts: 50,
        objects: 50,
        records: 150,
        manifestUri: kit.store.uriOf(manifestKey),
      }),
    ]);
    const html = (await kit.store.getBuffer(runReportKeys('fan50').html)).toString();
    expect(html).toContain('<svg');
    expect(html).toContain('fanout-demo');
  });

  it('re-enqueueing the same run adds no job and rewrites no object', async () => {
    const config = { runId: 'again', seed: 3, stages: { 'fanout-demo': { parts: 5 } } };
    await kit.startWorkers({ queues: ['fanout-demo', 'runs'] });
    await enqueueRun(kit.context, plan(config));
    expect((await watchRun(kit.context, 'again', { intervalMs: 100 })).state).toBe('completed');
    const countsBefore = await jobCounts();
    const objectsBefore = [];
    for await (const object of kit.store.list('runs/again/')) objectsBefore.push(object);
    const runJobBefore = await kit.context.runsQueue.getJob('again');

    // Through the API (it sees the run exists) and straight through the FlowProducer (the
    // deterministic ids alone must make it a no-op), with a later clock.
    const replanned = plan(config, new Date('2025-02-01T00:00:00Z'));
    expect(await enqueueRun(kit.context, replanned)).toEqual({
      runId: 'again',
      enqueued: false,
      existingState: 'completed',
    });
    await kit.context.flowProducer.add(buildRunFlow(replanned, { jobDataLimit: kit.env.HAT_JOB_DATA_LIMIT }));
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    expect(await jobCounts()).toEqual(countsBefore);
    const runJobAfter = await kit.context.runsQueue.getJob('again');
    expect(await runJobAfter?.getState()).toBe('completed');
    expect(runJobAfter?.finishedOn).toBe(runJobBefore?.finishedOn);
    const objectsAfter = [];
    for await (const object of kit.store.list('runs/again/')) objectsAfter.push(object);
    expect(objectsAfter).toEqual(objectsBefore);
  });

  it('refuses to reuse a run id with a different config', async () => {
    await enqueueRun(kit.context, plan({ runId: 'taken', stages: { noop: {} } }));
    await expect(
      enqueueRun(kit.context, plan({ runId: 'taken', stages: { noop: { label: 'other' } } })),
    ).rejects.toThrow(/\[RUN_EXISTS\] run taken already exists/);
  });

  it('chains a stage to an earlier stage output and records both in the run manifest', async () => {
    const runPlan = plan({
      runId: 'chain',
      stages: { noop: { label: 'reader', inputs: ['${stages.fanout-demo.manifestUri}'] }, 'fanout-demo': { parts: 3 } },
    });
    expect(runPlan.stages.find((stage) => stage.name === 'noop')?.input).toEqual({
      label: 'reader',
      inputs: [kit.store.uriOf('runs/chain/fanout-demo/manifest.json')],
    });
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
    await enqueueRun(kit.context, runPlan);
    const status = await watchRun(kit.context, 'chain', { intervalMs: 100 });
    if (status.state !== 'completed') console.log(JSON.stringify(status, null, 1));
    expect(status.state).toBe('completed');

    const noopJob = await kit.context
      .queue('noop')
      .getJob(status.stages.find((stage) => stage.name === 'noop')?.jobId ?? '');
    expect(noopJob?.returnvalue.output).toEqual({
      label: 'reader',
      inputs: [{ uri: kit.store.uriOf('runs/chain/fanout-demo/manifest.json'), objects: 3 }],
    });
    const runManifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer(runManifestKey('chain'))).toString()),
    );
    expect(runManifest.stages.map((stage) => [stage.name, stage.status, stage.dependsOn])).toEqual([
      ['noop', 'completed', ['fanout-demo']],
      ['fanout-demo', 'completed', []],
    ]);
    // fanout-demo finished before noop started.
    const [noop, fanout] = runManifest.stages;
    expect(Date.parse(fanout?.finishedAt ?? '')).toBeLessThanOrEqual(Date.parse(noop?.startedAt ?? ''));
  });

  it('reports a run that is enqueued but has no workers as waiting', async () => {
    await enqueueRun(kit.context, plan({ runId: 'idle', stages: { 'fanout-demo': { parts: 2 }, noop: {} } }));
    const status = await getRunStatus(kit.context, 'idle');
    expect(status).toMatchObject({ runId: 'idle', state: 'waiting' });
    expect(status.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['fanout-demo', 'waiting'],
      ['noop', 'waiting'],
    ]);
  });

  it('works under a hash-tagged prefix ({...}), as Redis Cluster needs', async () => {
    const tagged = await createQueueTestKit({}, { hashTag: true });
    try {
      expect(tagged.prefix).toMatch(/^\{test-[0-9a-f-]+\}$/);
      await tagged.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
      await enqueueRun(
        tagged.context,
        planRun(
          {
            runId: 'tagged',
            stages: { 'fanout-demo': { parts: 3 }, noop: { inputs: ['${stages.fanout-demo.manifestUri}'] } },
          },
          { env: tagged.env, now: new Date() },
        ),
      );
      expect((await watchRun(tagged.context, 'tagged', { intervalMs: 100 })).state).toBe('completed');
      const keys = await tagged.context.connection.keys(`${tagged.prefix}:*`);
      expect(keys.length).toBeGreaterThan(10);
      expect(keys.every((key) => key.startsWith(`${tagged.prefix}:`))).toBe(true);
    } finally {
      await tagged.cleanup();
    }
  });
});
