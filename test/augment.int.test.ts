import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import type { S3ArtifactStore } from '../shared/artifacts/s3-artifact-store';
import { harnessHash } from '../shared/harness/harness-hash';
import type { Harness } from '../shared/harness/harness-types';
import { loadHarness, loadHarnessFromFiles } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { harnessToFiles } from '../shared/harness/write-harness';
import type { Task } from '../shared/simulator/tasks/task-schema';
import { trajectorySchema, type Trajectory } from '../shared/trajectory/trajectory';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import type { AugmentStats } from '../workers/augment/augment-stats';
import { expertTrajectories } from '../workers/augment/expert-trajectories';
import { useLocalS3Server } from './support/s3-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/** The augment stage through real Redis (BullMQ, sandboxed worker threads) with inputs in a local S3-compatible server. */
describe('augment stage under BullMQ with S3 inputs', () => {
  const s3 = useLocalS3Server();
  let kit: QueueTestKit;
  let inputs: S3ArtifactStore;
  let canonical: Harness;
  let trajectories: Trajectory[];
  let tasks: Task[];

  beforeAll(async () => {
    canonical = await loadHarness(sampleHarnessDirectory());
    ({ tasks, trajectories } = await expertTrajectories(canonical, { count: 16, seed: 'augment-int' }));
  });

  beforeEach(async () => {
    kit = await createQueueTestKit(s3.env);
    inputs = s3.store();
    for (const [path, text] of Object.entries(harnessToFiles(canonical)))
      await inputs.put(`harness/live-host/${path}`, text);
    await writeJsonl(inputs, 'collect/trajectories.jsonl.gz', trajectories);
    await writeJsonl(inputs, 'collect/tasks.jsonl.gz', tasks);
  });

  afterEach(async () => {
    await kit.cleanup();
  });

  it('runs its parts in sandboxed threads, reads the harness from an s3:// prefix and publishes the manifest last', async () => {
    const pool = await kit.startWorkers({ queues: ['augment', 'runs'], sandbox: 'auto', concurrency: 2 });
    expect(pool.sandboxed).toEqual(['augment']);
    const config = {
      runId: 'hsa',
      seed: 11,
      stages: {
        augment: {
          trajectories: [inputs.uriOf('collect/trajectories.jsonl.gz')],
          tasks: [inputs.uriOf('collect/tasks.jsonl.gz')],
          harness: inputs.uriOf('harness/live-host'),
          variantPool: 6,
          variantsPerTrajectory: 3,
        },
      },
    };
    await enqueueRun(kit.context, planRun(config, { env: kit.env, now: new Date('2025-03-01T00:00:00Z') }));
    const status = await watchRun(kit.context, 'hsa', { intervalMs: 200 });
    expect([status.state, status.error, status.stages[0]?.error]).toEqual(['completed', undefined, undefined]);

    const manifestKey = 'runs/hsa/augment/manifest.json';
    const manifest = await readManifest(kit.store, manifestKey);
    // Sandboxed threads write through their own stores: the manifest's time says it came last.
    const written = await Promise.all(
      manifest.objects.map(async (object) => (await kit.store.head(object.key))?.lastModified?.getTime() ?? Infinity),
    );
    expect((await kit.store.head(manifestKey))?.lastModified?.getTime()).toBeGreaterThanOrEqual(Math.max(...written));
    expect(manifest.lineage.inputs.map((input) => input.uri)).toEqual([
      inputs.uriOf('collect/trajectories.jsonl.gz'),
      inputs.uriOf('collect/tasks.jsonl.gz'),
      inputs.uriOf('harness/live-host'),
    ]);

    const emitted: Trajectory[] = [];
    for await (const record of readJsonl(kit.store, 'runs/hsa/augment/trajectories/part-00000.jsonl.gz', {
      schema: trajectorySchema,
    }))
      emitted.push(record);
    const stats = JSON.parse(
      (await kit.store.getBuffer('runs/hsa/augment/stats.json')).toString('utf8'),
    ) as AugmentStats;
    expect(stats.pairs.generated).toBe(trajectories.length * 3);
    expect(emitted).toHaveLength(stats.pairs.kept);
    expect(emitted.length).toBeGreaterThan(trajectories.length * 2);
    for (const trajectory of emitted.slice(0, 8)) {
      const prefix = `runs/hsa/augment/variants/${trajectory.harness.variantHash}/`;
      const files: Record<string, string> = {};
      for await (const object of kit.store.list(prefix))
        files[object.key.slice(prefix.length)] = (await kit.store.getBuffer(object.key)).toString('utf8');
      expect(harnessHash(loadHarnessFromFiles(files, prefix))).toBe(trajectory.harness.hash);
      expect(trajectory.meta).toMatchObject({
        sourceTrajectoryId: expect.stringMatching(/^traj-/),
        augment: { replayChecked: true },
      });
    }
    expect(manifest.objects.map((object) => object.key)).toEqual(
      expect.arrayContaining([
        'runs/hsa/augment/report.html',
        'runs/hsa/augment/relabel.jsonl.gz',
        'runs/hsa/augment/stats.json',
      ]),
    );
  });
});
