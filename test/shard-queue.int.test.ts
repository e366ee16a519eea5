import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { expertTrajectories } from '../workers/augment/expert-trajectories';
import { shardStage } from '../workers/shard/processor';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * The shard stage under BullMQ on real Redis: parts in sandboxed worker threads (the stage is
 * CPU-heavy), the fan-in's tasks as jobs of their own, the manifest last, and the same bytes as
 * `hat stage` gives in one process for the same input and seed.
 */
describe('shard stage under BullMQ', () => {
  let kit: QueueTestKit;
  let local: string;

  beforeAll(async () => {
    kit = await createQueueTestKit();
    local = await mkdtemp(join(tmpdir(), 'hat-shard-local-'));
  });
  afterAll(async () => {
    await kit.cleanup();
    await rm(local, { recursive: true, force: true });
  });

  it('runs its parts in sandboxed threads and writes what the in-process binding writes', async () => {
    const { trajectories } = await expertTrajectories(await loadHarness(sampleHarnessDirectory()), {
      count: 12,
      seed: 'shard-queue',
    });
    const input = await writeJsonl(kit.store, 'inputs/trajectories.jsonl.gz', trajectories);
    const pool = await kit.startWorkers({ queues: ['shard', 'runs'], sandbox: 'auto', concurrency: 2 });
    expect(pool.sandboxed).toEqual(['shard']);
    const stageConfig = { inputs: [input.uri], recordsPerPart: 4, validationFraction: 0.25 };
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'sft', seed: 7, stages: { shard: stageConfig } },
        { env: kit.env, now: new Date('2025-03-01T00:00:00Z') },
      ),
    );
    const status = await watchRun(kit.context, 'sft', { intervalMs: 200 });
    expect([status.state, status.error, status.stages[0]?.error]).toEqual(['completed', undefined, undefined]);

    const manifestKey = 'runs/sft/shard/manifest.json';
    const manifest = await readManifest(kit.store, manifestKey);
    const written = await Promise.all(
      manifest.objects.map(async (object) => (await kit.store.head(object.key))?.lastModified?.getTime() ?? Infinity),
    );
    expect((await kit.store.head(manifestKey))?.lastModified?.getTime()).toBeGreaterThanOrEqual(Math.max(...written));
    expect(manifest.lineage.inputs).toEqual([{ uri: input.uri, sha256: input.sha256 }]);
    expect(manifest.stats).toMatchObject({ records: 12, samples: 12, duplicates: 0 });
    // The fan-in ran as jobs any worker can take: packing, each JSONL export, verl Parquet.
    const tasks = (await kit.context.queue('shard').getJobs(['completed'])).filter((job) => job.name === 'fan-in-task');
    expect(
      tasks
        .map((job) => (job.data as { task: unknown }).task)
        .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
    ).toEqual([
      { format: 'llama-factory', kind: 'export' },
      { format: 'ms-swift', kind: 'export' },
      { format: 'openai', kind: 'export' },
      { kind: 'packed' },
      { kind: 'verl' },
    ]);

    const localStore = new FileArtifactStore(local);
    await runStageLocally(shardStage, stageConfig, {
      store: localStore,
      openObject: (uri) => ({ store: kit.store, key: kit.store.keyOf(uri) }),
      logger: silentLogger(),
      seed: '7',
      runId: 'sft',
    });
    const localManifest = await readManifest(localStore, 'manifest.json');
    const prefix = 'runs/sft/shard/';
    expect(manifest.objects.map((object) => [object.key.slice(prefix.length), object.sha256])).toEqual(
      localManifest.objects.map((object) => [object.key, object.sha256]),
    );
  });
});
