import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest, type Manifest } from '../shared/artifacts/manifest';
import { loadEnv } from '../shared/config/env';
import { silentLogger } from '../shared/log/logger';
import { loggerInto } from './support/captured-logger';
import { enqueueRun } from '../queues/runs/flows';
import type { QueueContext } from '../queues/bullmq/queue-context';
import { planRun } from '../queues/runs/run-config';
import { getRunStatus, watchRun } from '../queues/runs/run-control';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { getStage } from '../queues/stage-kit/stage-registry';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { registerCatalogStages } from '../workers/stage-catalog';
import { startWorkerPool, type WorkerPool } from '../workers/worker-pool';
import { freePort } from './support/free-port';
import { shutdownPrivateRedis, startPrivateRedis } from './support/private-redis';
import { startHat, type HatProcess } from './support/hat-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/** The data objects of a stage manifest: key, kind and sha256 (timings live in other objects). */
const dataObjects = (manifest: Manifest) =>
  manifest.objects
    .filter((object) => object.format === 'jsonl.gz')
    .map((object) => [object.key, object.kind, object.sha256]);

/** The collect stage run in-process without Redis: what an undisturbed run writes. */
async function referenceOutput(directory: string, runId: string, config: unknown): Promise<Manifest> {
  const store = new FileArtifactStore(directory);
  const stores = createStoreCache({});
  try {
    await runStageLocally(getStage('collect'), config, {
      store,
      outputPrefix: `runs/${runId}/collect/`,
      openObject: stores.openObject,
      runId,
      seed: '0',
      logger: silentLogger(),
    });
  } finally {
    await stores.close();
  }
  return readManifest(store, `runs/${runId}/collect/manifest.json`);
}

/**
 * Workers and Redis going away mid-run: a worker killed with SIGKILL in the middle of a part (the
 * part is taken up again once its lock lapses and a stall check finds it), and Redis shut down
 * and restarted (workers reconnect). Either way the run completes and writes what an undisturbed
 * run writes, byte for byte.
 */
describe('worker and Redis faults', () => {
  let directory: string;
  beforeAll(() => registerCatalogStages());
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-worker-faults-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  describe('a worker killed mid-part', () => {
    let kit: QueueTestKit;
    const workers: HatProcess[] = [];
    afterEach(async () => {
      for (const worker of workers.splice(0)) {
        if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
        await worker.exited;
      }
      await kit.cleanup();
    });

    it('hands the part to another worker after stall detection; the output equals an undisturbed run', async () => {
      kit = await createQueueTestKit();
      const runId = 'killed-worker';
      const config = { generate: { count: 600, seed: 21 }, tasksPerPart: 300, concurrency: 1 };
      const expected = await referenceOutput(join(directory, 'reference'), runId, config);
      // Short locks and stall checks bring a dead worker's part back within seconds; with BullMQ's
      // defaults (30 s lock, 30 s stall check) it takes up to about a minute and a half.
      const env = {
        HAT_REDIS_PREFIX: kit.prefix,
        HAT_ARTIFACTS: kit.artifactsRoot,
        HAT_LOG_LEVEL: 'warn',
        HAT_LOCK_DURATION_MS: '2000',
        HAT_STALLED_INTERVAL_MS: '1000',
      };
      const first = startHat(['worker', '--stages', 'collect,runs', '--concurrency', '1'], env);
      workers.push(first);
      await enqueueRun(kit.context, planRun({ runId, stages: { collect: config } }, { env: kit.env, now: new Date() }));

      // Kill it while it is inside a part (a part takes a second or two).
      const victim = await waitFor(
        async () => (await kit.context.queue('collect').getActive()).find((job) => job.name === 'part'),
        20_000,
        20,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      first.child.kill('SIGKILL');
      await first.exited;
      expect(await (await kit.context.queue('collect').getJob(victim.id ?? ''))?.getState()).toBe('active');

      const second = startHat(['worker', '--stages', 'collect,runs', '--concurrency', '2'], env);
      workers.push(second);
      const status = await watchRun(kit.context, runId, { intervalMs: 200 });
      expect([status.state, status.error, first.stderr()]).toEqual(['completed', undefined, '']);
      const retaken = await kit.context.queue('collect').getJob(victim.id ?? '');
      expect(retaken?.stalledCounter).toBe(1);
      expect(retaken?.attemptsMade).toBe(1);
      expect(dataObjects(await readManifest(kit.store, `runs/${runId}/collect/manifest.json`))).toEqual(
        dataObjects(expected),
      );
    }, 120_000);
  });

  describe('Redis restarted mid-run', () => {
    let redis: ChildProcess | undefined;
    let pool: WorkerPool | undefined;
    let context: QueueContext | undefined;

    afterEach(async () => {
      await pool?.close(5_000);
      await context?.close();
      if (redis && redis.exitCode === null && redis.signalCode === null) {
        const exited = new Promise((resolve) => redis?.once('exit', resolve));
        redis.kill('SIGKILL');
        await exited;
      }
    });

    it('completes the run after a Redis SHUTDOWN and restart (AOF), workers reconnecting, with the same output', async () => {
      const port = await freePort();
      const dataDirectory = join(directory, 'redis');
      await mkdir(dataDirectory, { recursive: true });
      redis = await startPrivateRedis(port, dataDirectory);
      const artifacts = join(directory, 'artifacts');
      const env = loadEnv({
        REDIS_URL: `redis://127.0.0.1:${port}`,
        HAT_REDIS_PREFIX: `test-${randomUUID()}`,
        HAT_ARTIFACTS: pathToFileURL(artifacts).href,
        HAT_LOG_LEVEL: 'silent',
      });
      const runId = 'redis-restart';
      const config = { generate: { count: 480, seed: 22 }, tasksPerPart: 30, concurrency: 1 };
      const expected = await referenceOutput(join(directory, 'reference'), runId, config);

      let logged = '';
      pool = await startWorkerPool({
        env,
        queues: ['collect', 'runs'],
        concurrency: 2,
        logger: loggerInto((text) => (logged += text), 'info'),
        sandbox: 'off',
      });
      await pool.waitUntilReady();
      // A worker-role connection: it waits out the restart instead of giving up.
      context = pool.context;
      await enqueueRun(context, planRun({ runId, stages: { collect: config } }, { env, now: new Date() }));
      const before = await waitFor(
        async () => {
          const current = await getRunStatus(context as QueueContext, runId);
          return (current.stages[0]?.partsDone ?? 0) >= 3 ? current : undefined;
        },
        20_000,
        50,
      );
      expect(before.state).toBe('running');
      expect(before.stages[0]?.partsDone).toBeLessThan(16);

      await shutdownPrivateRedis(port, redis);
      // Named while it lasts: one warn line, not BullMQ's error for every failed reconnect.
      const lines = () =>
        logged
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as { level: number; msg: string });
      await waitFor(async () => lines().some((line) => line.msg.startsWith('Redis does not answer')), 20_000, 50);
      redis = await startPrivateRedis(port, dataDirectory);

      const status = await watchRun(context, runId, { intervalMs: 200 });
      expect([status.state, status.error]).toEqual(['completed', undefined]);
      expect(status.stages[0]).toMatchObject({ partsDone: 16, partsTotal: 16 });
      const outage = lines().filter((line) => line.msg.startsWith('Redis'));
      expect(outage[0]).toMatchObject({ level: 40 });
      expect(outage[0].msg).toMatch(
        /^Redis does not answer \(.+\); the worker keeps reconnecting and carries on when it answers: jobs stay in Redis, and a part whose lock lapses meanwhile is handed back by the stall check$/,
      );
      // Each outage line is followed by an 'answers again' line (a connection may come back before another fails).
      expect(outage.map((line) => (line.msg.startsWith('Redis does not answer') ? 'down' : 'up')).join(',')).toMatch(
        /^down,up(,down,up)*$/,
      );
      expect(outage[1]).toMatchObject({ level: 30, msg: 'Redis answers again; the worker carries on' });
      expect(lines().filter((line) => line.level >= 50)).toEqual([]);
      const store = new FileArtifactStore(artifacts);
      expect(dataObjects(await readManifest(store, `runs/${runId}/collect/manifest.json`))).toEqual(
        dataObjects(expected),
      );
    });
  });
});
