/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest } from '../shared/artifacts/manifest';
import { silentLogger } from '../shared/log/logger';
import { distillStage } from '../workers/distill/processor';
import {
  makeTinyDistillModels,
  tinyDistillConfig,
  type TinyDistillModels,
} from '../workers/distill/testing/tiny-distill-models';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/** The distill stage as a BullMQ flow through real Redis: the same bytes as `hat stage`'s binding. */

let root: string;
let models: TinyDistillModels;
let kit: QueueTestKit;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'hat-distill-queue-'));
  models = makeTinyDistillModels(join(root, 'models'));
});

beforeEach(async () => {
  kit = await createQueueTestKit();
});

afterEach(async () => {
  await kit.cleanup();
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function config() {
  return tinyDistillConfig(models, {
    prompts: [{ kind: 'builtin', limit: 5 }],
    sampling: { temperature: 1, maxNewTokens: 6 },
    teacherTopK: 2,
  });
}

describe('distill through real queues', () => {
  it('fans out into part jobs, writes the manifest last, and matches the in-process run byte for byte', async () => {
    const runPlan = planRun(
      { runId: 'distill-flow', seed: 'flow-seed', stages: { distill: config() } },
      { env: kit.env, now: new Date('2025-01-31T02:00:00Z') },
    );
    await kit.startWorkers({ queues: ['distill', 'runs'], concurrency: 2 });
    await enqueueRun(kit.context, runPlan);
    const status = await watchRun(kit.context, 'distill-flow', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    expect(status.stages).toEqual([
      expect.objectContaining({ name: 'distill', state: 'completed', partsDone: 3, partsTotal: 3 }),
    ]);

    const prefix = 'runs/distill-flow/distill/';
    const manifestKey = `${prefix}manifest.json`;
    const manifest = await readManifest(kit.store, manifestKey);
    expect(manifest.stats).toMatchObject({ dummyWeights: true, global: { prompts: 5, samples: 10 } });
    const manifestAt = kit.putOrder.indexOf(manifestKey);
    expect(Math.max(...manifest.objects.map((object) => kit.putOrder.indexOf(object.key)))).toBeLessThan(manifestAt);

    const local = new FileArtifactStore(join(root, 'local'));
    await runStageLocally(distillStage, config(), {
      store: local,
      openObject: (uri) => openArtifactObject(uri),
      logger: silentLogger(),
      seed: 'flow-seed',
      runId: 'distill-flow',
    });
    for (const name of ['part-00000.parquet', 'part-00001.jsonl.gz', 'part-00002.parquet', 'stats.json']) {
      expect((await kit.store.getBuffer(`${prefix}${name}`)).equals(await local.getBuffer(name))).toBe(true);
    }
  });
});
