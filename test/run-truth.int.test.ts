import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { runManifestKey, runReportKeys } from '../queues/runs/run-layout';
import { cancelRun, getRunStatus, watchRun } from '../queues/runs/run-control';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { runManifestSchema } from '../workers/run/run-manifest';
import { loggerInto } from './support/captured-logger';
import { runHatInProcess } from './support/hat-in-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/** Issue #20: what a run says about its stages agrees with the stages themselves, under faults. */
describe('run reports tell the truth', () => {
  let kit: QueueTestKit;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  const plan = (config: unknown) => planRun(config, { env: kit.env, now: new Date() });
  const readJson = async (key: string) =>
    JSON.parse((await kit.store.getBuffer(key)).toString()) as Record<string, unknown>;

  it('records an upstream stage that completed as completed when a downstream stage fails', async () => {
    const missing = kit.store.uriOf('runs/elsewhere/manifest.json');
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
    await enqueueRun(
      kit.context,
      plan({
        runId: 'downfail',
        stages: { 'fanout-demo': { parts: 3 }, noop: { inputs: ['${stages.fanout-demo.manifestUri}', missing] } },
      }),
    );
    const status = await watchRun(kit.context, 'downfail', { intervalMs: 100 });
    expect(status.state).toBe('failed');
    expect(await kit.store.head('runs/downfail/fanout-demo/manifest.json')).toBeDefined();

    const manifest = runManifestSchema.parse(await readJson(runManifestKey('downfail')));
    const byName = new Map(manifest.stages.map((stage) => [stage.name, stage]));
    expect(byName.get('fanout-demo')).toMatchObject({ status: 'completed', parts: 3, objects: 3 });
    expect(byName.get('noop')?.status).toBe('failed');
    const report = await readJson(runReportKeys('downfail').json);
    expect(JSON.stringify(report)).toContain('"completed"');
    const reportStages = (report.stages as Array<{ name: string; status: string }>).map((stage) => [
      stage.name,
      stage.status,
    ]);
    expect(reportStages).toEqual(
      expect.arrayContaining([
        ['fanout-demo', 'completed'],
        ['noop', 'failed'],
      ]),
    );
    const html = (await kit.store.getBuffer(runReportKeys('downfail').html)).toString();
    expect(html).toMatch(/fanout-demo[\s\S]*completed/);
    const shown = await getRunStatus(kit.context, 'downfail');
    expect(shown.stages.find((stage) => stage.name === 'fanout-demo')?.state).toBe('completed');
  });

  it('records a stage that completed before a cancel as completed in the cancelled run', async () => {
    // No noop worker: the downstream stage waits until the cancel.
    const lines: string[] = [];
    const pool = await kit.startWorkers({
      queues: ['fanout-demo', 'runs'],
      logger: loggerInto((text) => lines.push(text), 'info'),
      metrics: {},
    });
    await enqueueRun(
      kit.context,
      plan({
        runId: 'cancelmid',
        stages: { 'fanout-demo': { parts: 2 }, noop: { inputs: ['${stages.fanout-demo.manifestUri}'] } },
      }),
    );
    await waitFor(async () => (await kit.store.head('runs/cancelmid/fanout-demo/manifest.json')) !== undefined, 30_000);
    await cancelRun(kit.context, 'cancelmid', Date.now());
    const status = await watchRun(kit.context, 'cancelmid', { intervalMs: 100 });
    expect(status.state).toBe('cancelled');
    const manifest = runManifestSchema.parse(await readJson(runManifestKey('cancelmid')));
    expect(manifest.stages.find((stage) => stage.name === 'fanout-demo')).toMatchObject({
      status: 'completed',
      objects: 2,
    });
    expect(manifest.stages.find((stage) => stage.name === 'noop')?.status).toBe('cancelled');
    // hat runs show names the stage as the manifest does.
    expect(status.stages.find((stage) => stage.name === 'noop')?.state).toBe('cancelled');
    // So do the worker's log and metrics: the run job the cancel stopped is cancelled, not a failure.
    const logged = () => lines.map((line) => JSON.parse(line) as { level: number; msg: string; queue?: string });
    await waitFor(async () => logged().some((line) => line.msg === 'job cancelled: its run was cancelled'), 30_000);
    expect(logged().filter((line) => line.level >= 50)).toEqual([]);
    const metrics = await pool.metrics!.render();
    expect(metrics).toContain('hat_jobs_cancelled_total{queue="runs"} 1');
    expect(metrics).not.toContain('code="RUN_CANCELLED"');
  });

  it('when the run job cannot write its report, the failure has a [CODE] and the CLI prints no path that was never written', async () => {
    const failing = await createQueueTestKit({ HAT_STORAGE_RETRY_MS: '0' });
    try {
      // The run's own objects fail with a raw error (as an SDK's socket error would); stage objects are written.
      const openStore = (rootUri: string): ArtifactStore => {
        const store = new FileArtifactStore(new URL(rootUri).pathname);
        const put = store.put.bind(store);
        store.put = async (key, body, options) => {
          if (/^runs\/[^/]+\/run-(report|manifest)/.test(key)) throw new Error('socket hang up');
          return put(key, body, options);
        };
        return store;
      };
      await failing.startWorkers({ queues: ['fanout-demo', 'runs'], openStore });
      const config = join(failing.artifactsDirectory, 'run.yaml');
      await writeFile(config, 'runId: unwritten\nstages:\n  fanout-demo: { parts: 2 }\n');
      const environment = {
        ...process.env,
        HAT_REDIS_PREFIX: failing.prefix,
        HAT_ARTIFACTS: failing.artifactsRoot,
        HAT_LOG_LEVEL: 'silent',
      };
      const result = await runHatInProcess(environment, 'run', config, '--wait');
      expect(result.code).toBe(1);
      expect(result.stderr).toContain("[RUN_JOB_FAILED] cannot write the run's report and manifest: socket hang up");
      expect(result.stderr).toMatch(/report: +\(not written/);
      expect(result.stderr).toMatch(/run manifest: +\(not written/);
      expect(result.stdout).not.toContain('run-report.html');
      expect(result.stderr).not.toContain('run-manifest.json');
      const shown = await runHatInProcess(environment, 'runs', 'show', 'unwritten');
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/report: +\(not written: the run job could not write it/);
      expect(shown.stdout).toMatch(/run manifest: +\(not written/);
      expect(shown.stdout).not.toMatch(/run-report\.html|run-manifest\.json/);
      const shownJson = await runHatInProcess(environment, 'runs', 'show', 'unwritten', '--json');
      expect(JSON.parse(shownJson.stdout).written).toEqual({ report: false, manifest: false });
      expect(await failing.store.head('runs/unwritten/fanout-demo/manifest.json')).toBeDefined();
    } finally {
      await failing.cleanup();
    }
  }, 60_000);

  it('hat runs retry resumes a cancelled run, reusing every part that had finished', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'], concurrency: 2 });
    await enqueueRun(
      kit.context,
      plan({
        runId: 'resume',
        stages: {
          'fanout-demo': { parts: 10, partDelayMs: 400 },
          noop: { inputs: ['${stages.fanout-demo.manifestUri}'] },
        },
      }),
    );
    await waitFor(
      async () =>
        ((await getRunStatus(kit.context, 'resume')).stages.find((stage) => stage.name === 'fanout-demo')?.partsDone ??
          0) >= 3,
      30_000,
    );
    await cancelRun(kit.context, 'resume', Date.now());
    expect((await watchRun(kit.context, 'resume', { intervalMs: 100 })).state).toBe('cancelled');
    const finishedBefore = kit.putOrder.filter((key) => /part-\d+\.jsonl\.gz$/.test(key));
    expect(finishedBefore.length).toBeGreaterThanOrEqual(3);
    expect(finishedBefore.length).toBeLessThan(10);

    const environment = {
      ...process.env,
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
      HAT_LOG_LEVEL: 'silent',
    };
    const retried = await runHatInProcess(environment, 'runs', 'retry', 'resume');
    expect(retried.stdout).toContain('resuming cancelled run resume');
    expect(retried.code).toBe(0);
    const status = await watchRun(kit.context, 'resume', { intervalMs: 100 });
    expect([status.state, status.error]).toEqual(['completed', undefined]);
    const partPuts = kit.putOrder.filter((key) => /part-\d+\.jsonl\.gz$/.test(key));
    // Each of the ten parts written exactly once: the finished ones were reused, not redone.
    expect(partPuts.length).toBe(10);
    expect(new Set(partPuts).size).toBe(10);
    const manifest = runManifestSchema.parse(await readJson(runManifestKey('resume')));
    expect(manifest.status).toBe('completed');
    expect(manifest.stages.map((stage) => stage.status)).toEqual(['completed', 'completed']);
  }, 90_000);
});
