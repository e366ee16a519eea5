import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../shared/artifacts/local-s3-server';
import { readManifest, type Manifest } from '../shared/artifacts/manifest';
import { sha256Hex } from '../shared/hash/hash';
import { silentLogger } from '../shared/log/logger';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { getStage } from '../queues/stage-kit/stage-registry';
import { S3FaultProxy } from './support/s3-fault-proxy';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';
import { startHat } from './support/hat-process';

/**
 * S3 faults between workers and the store (500s, connections dropped before and after a request
 * is served, bodies cut off half-way, slow listings): the run retries through them, writes the
 * same bytes as an undisturbed run, and never shows a partial object under a final key.
 */
describe('S3 faults', () => {
  let s3: LocalS3Server;
  let proxy: S3FaultProxy;
  let kit: QueueTestKit;
  let directory: string;

  beforeAll(async () => {
    s3 = await startLocalS3Server({ bucket: 'faults' });
    proxy = await S3FaultProxy.start({ target: s3.endpoint, seed: 'ops-faults-s3' });
  });
  afterAll(async () => {
    await proxy.close();
    await s3.stop();
  });
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-s3-faults-'));
  });
  afterEach(async () => {
    await kit?.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  it('retries through injected faults; every object visible during the run is complete, and the output equals an undisturbed run', async () => {
    const runId = 's3-faults';
    const collectConfig = { generate: { count: 24, seed: 11 }, tasksPerPart: 4 };
    const proxyEnv = { ...s3.env, S3_ENDPOINT: proxy.endpoint };
    kit = await createQueueTestKit({ ...proxyEnv, HAT_ARTIFACTS: `s3://faults/${runId}-root` });
    const root = kit.env.HAT_ARTIFACTS as string;

    // The reference: the same stage in-process on a local directory, no faults.
    const reference = new FileArtifactStore(join(directory, 'reference'));
    const stores = createStoreCache({});
    await runStageLocally(getStage('collect'), collectConfig, {
      store: reference,
      outputPrefix: `runs/${runId}/collect/`,
      openObject: stores.openObject,
      runId,
      seed: '0',
      logger: silentLogger(),
    });
    await stores.close();

    proxy.setRules([
      { methods: ['PUT'], probability: 0.1, fault: { kind: 'status', status: 500 }, first: 1 },
      { methods: ['PUT'], probability: 0.1, fault: { kind: 'reset-after' }, first: 1 },
      { methods: ['HEAD'], probability: 0.1, fault: { kind: 'reset-before' }, first: 1 },
      { methods: ['GET', 'HEAD'], probability: 0.2, fault: { kind: 'delay', ms: 200 }, first: 1 },
      { methods: ['GET'], probability: 0.1, fault: { kind: 'status', status: 503 }, first: 1 },
      // Object bodies cut off half-way: the reader sees the stream end early (the part is retried).
      {
        methods: ['GET'],
        path: /x-id=GetObject/,
        probability: 0.2,
        fault: { kind: 'truncate-body' },
        limit: 2,
        first: 1,
      },
    ]);
    await kit.startWorkers({
      queues: ['collect', 'runs'],
      openStore: (rootUri) => createArtifactStore(rootUri, proxyEnv),
    });

    // Watches the bucket directly (not through the proxy) while the run goes.
    const direct = createArtifactStore(root, s3.env);
    const seen: Array<{ key: string; bytes: number; from: number; to: number }> = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const from = Date.now();
        const listed: Array<{ key: string; bytes: number }> = [];
        for await (const object of direct.list(`runs/${runId}/`)) listed.push({ key: object.key, bytes: object.bytes });
        const to = Date.now();
        for (const object of listed) seen.push({ ...object, from, to });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    try {
      await enqueueRun(
        kit.context,
        planRun({ runId, stages: { collect: collectConfig } }, { env: kit.env, now: new Date() }),
      );
      const status = await watchRun(kit.context, runId, { intervalMs: 200 });
      watching = false;
      await watcher;
      expect([status.state, status.error]).toEqual(['completed', undefined]);

      const counts = proxy.counts();
      for (const kind of ['status', 'reset-after', 'reset-before', 'delay', 'truncate-body'])
        expect(counts[kind] ?? 0).toBeGreaterThan(0);

      // The same bytes as the undisturbed run.
      const manifest = await readManifest(direct, `runs/${runId}/collect/manifest.json`);
      const expected = await readManifest(reference, `runs/${runId}/collect/manifest.json`);
      const data = (entry: Manifest) =>
        entry.objects
          .filter((object) => object.format === 'jsonl.gz')
          .map((object) => [object.key, object.kind, object.sha256]);
      expect(data(manifest)).toEqual(data(expected));
      expect(data(manifest).length).toBeGreaterThan(6);

      // Every object there now is complete: listed ones by their manifest sha256, the others parse.
      const listed = new Map<string, string>();
      for (const stage of ['collect'])
        for (const object of (await readManifest(direct, `runs/${runId}/${stage}/manifest.json`)).objects)
          listed.set(object.key, object.sha256);
      const finalSizes = new Map<string, number>();
      let verified = 0;
      for await (const object of direct.list(`runs/${runId}/`)) {
        const bytes = await direct.getBuffer(object.key);
        finalSizes.set(object.key, bytes.length);
        const sha256 = listed.get(object.key);
        if (sha256 !== undefined) {
          expect([object.key, sha256Hex(bytes)]).toEqual([object.key, sha256]);
          verified++;
        } else if (object.key.endsWith('.gz')) expect(() => gunzipSync(bytes)).not.toThrow();
        else if (object.key.endsWith('.json')) expect(() => JSON.parse(bytes.toString('utf8'))).not.toThrow();
        else expect(bytes.toString('utf8')).toMatch(/<\/html>\s*$/);
      }
      expect(verified).toBe(listed.size);
      expect(finalSizes.size).toBeGreaterThan(listed.size);
      // Nothing was visible under a final key with other than its final size, except while the
      // server was still receiving a PUT of that key (s3rver writes in place; S3 does not).
      const partial = seen.filter((observation) => observation.bytes !== finalSizes.get(observation.key));
      const unexplained = partial.filter(
        (observation) =>
          !proxy.puts.some(
            (put) =>
              put.path.endsWith(`/${observation.key}`) &&
              put.startedAt <= observation.to &&
              (put.endedAt ?? Infinity) >= observation.from,
          ),
      );
      expect(unexplained).toEqual([]);
      expect(new Set(seen.map((observation) => observation.key)).size).toBeGreaterThan(10);
    } finally {
      watching = false;
      await watcher;
      await direct.close();
    }
  });

  it('names an S3 outage while it lasts: a worker logs each retry at warn with the object, the cause and the time left, and the run completes once S3 answers', async () => {
    const runId = 's3-outage';
    const proxyEnv = { ...s3.env, S3_ENDPOINT: proxy.endpoint };
    kit = await createQueueTestKit({ ...proxyEnv, HAT_ARTIFACTS: `s3://faults/${runId}-root` });
    const root = kit.env.HAT_ARTIFACTS as string;
    // Every write answered 503 SlowDown (after the SDK's own attempts): an outage, not a blip.
    proxy.setRules([{ methods: ['PUT'], probability: 1, fault: { kind: 'status', status: 503, code: 'SlowDown' } }]);
    const worker = startHat(['worker', '--stages', 'fanout-demo,runs', '--concurrency', '1'], {
      ...proxyEnv,
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: root,
      HAT_LOG_LEVEL: 'warn',
      HAT_STORAGE_RETRY_MS: '120000',
    });
    try {
      await enqueueRun(
        kit.context,
        planRun({ runId, stages: { 'fanout-demo': { parts: 1 } } }, { env: kit.env, now: new Date() }),
      );
      const retries = () =>
        worker
          .stderr()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { level: number; msg: string; timeLeftMs?: number; part?: string })
          .filter((line) => line.msg.startsWith('storage fault'));
      // Seen while the outage lasts, not when the budget runs out.
      const first = await waitFor(async () => retries()[0], 60_000, 100);
      // The part's write streams its body, so the job waits it out (a buffered put retries in the store).
      const uri = `${root}/runs/${runId}/fanout-demo/part-00000.jsonl.gz`.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
      expect(first).toMatchObject({ level: 40, runId, stage: 'fanout-demo', part: 'part-00000' });
      expect(first.msg).toMatch(
        new RegExp(
          `^storage fault \\(\\[S3_UNAVAILABLE\\] put ${uri} failed after 3 attempts: SlowDown: .*\\); the job waits and tries again in [\\d.]+ s, [\\d.]+ s of HAT_STORAGE_RETRY_MS left$`,
        ),
      );
      expect(first.timeLeftMs).toBeGreaterThan(100_000);
      expect(first.timeLeftMs).toBeLessThanOrEqual(120_000);
      expect(proxy.counts().status).toBeGreaterThan(0);

      proxy.setRules([]);
      const status = await watchRun(kit.context, runId, { intervalMs: 200 });
      expect([status.state, status.error]).toEqual(['completed', undefined]);
    } finally {
      proxy.setRules([]);
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
  }, 120_000);
});
