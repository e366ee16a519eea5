import { createHash } from 'node:crypto';
import { MemoryArtifactStore } from '../shared/artifacts/memory-artifact-store';
import { createLogger } from '../shared/log/logger';
import { runStageLocally } from '../queues/run-stage-locally';
import { augmentStage } from '../workers/augment/processor';
import { collectStage } from '../workers/collect/processor';
import { shardStage } from '../workers/shard/processor';

/**
 * Throughput work must not change what the stages write. collect (generated tasks, scripted
 * teacher) → augment (1 variant per trajectory, replay check on) → shard (Qwen3, 8192) run
 * in-process on a fixed seed and a fixed clock; every object each stage writes is hashed (key and
 * bytes). The expected digests were computed from the code before the throughput changes
 * (issue 18) and are committed here: any byte that moves fails the test, naming the stage.
 */

const expected: Record<string, string> = {
  collect: '8313e54a161d4fa715bd3efc26f0bb1a68a87cf6f5d9c1fa63de16acc22ae226',
  augment: '0e748def89624ec25cd35dce6366a5f840e0e4bd096d6048e7b59f8e09b05d8e',
  shard: '8223f64f86e6749ca03221e21d4bdc65e100080f1d716fa708c80cd7d05a946c',
};

async function digestOf(store: MemoryArtifactStore, prefix: string): Promise<{ digest: string; keys: string[] }> {
  const hash = createHash('sha256');
  const keys: string[] = [];
  for await (const object of store.list(`${prefix}/`)) {
    keys.push(object.key);
    hash.update(`${object.key}\n`);
    hash.update(await store.getBuffer(object.key));
    hash.update('\n');
  }
  return { digest: hash.digest('hex'), keys };
}

describe('stage outputs for a fixed seed', () => {
  it('collect, augment and shard write the same bytes as before the throughput changes', async () => {
    const store = new MemoryArtifactStore('golden');
    const options = {
      store,
      openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
      logger: createLogger({ level: 'silent' }),
      clock: { now: () => Date.UTC(2025, 0, 2, 3, 4, 5) },
      concurrency: 1,
      seed: 'golden',
      runId: 'golden',
    };
    const collected = (await runStageLocally(collectStage, { generate: { count: 60, seed: 'golden', itemCount: 500 }, tasksPerPart: 25 }, { ...options, outputPrefix: 'collect' })).output as { manifestUri: string };
    const augmented = (await runStageLocally(augmentStage, { inputs: [collected.manifestUri], variantsPerTrajectory: 1, recordsPerPart: 25 }, { ...options, outputPrefix: 'augment' })).output as {
      manifestUri: string;
    };
    await runStageLocally(
      shardStage,
      { inputs: [collected.manifestUri, augmented.manifestUri], tokenizer: { preset: 'qwen3' }, sequenceLength: 8192, recordsPerPart: 40, renderDate: '2025-01-02T03:04:05Z' },
      { ...options, outputPrefix: 'shard' },
    );
    const actual: Record<string, string> = {};
    for (const stage of Object.keys(expected)) {
      const { digest, keys } = await digestOf(store, stage);
      expect(keys.length).toBeGreaterThan(2);
      actual[stage] = digest;
    }
    expect(actual).toEqual(expected);
  });
});
