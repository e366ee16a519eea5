import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MemoryArtifactStore } from '../shared/artifacts/memory-artifact-store';
import { createLogger } from '../shared/log/logger';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { augmentStage } from '../workers/augment/processor';
import { collectStage } from '../workers/collect/processor';
import { shardStage } from '../workers/shard/processor';
import { codeVersion, version } from '../shared/version';

/**
 * Throughput work must not change what the stages write. collect (generated tasks, scripted
 * teacher) → augment (1 variant per trajectory, replay check on) → shard (Qwen3, 8192) run
 * in-process on a fixed seed and a fixed clock; every object each stage writes is hashed (key and
 * bytes; manifests record the code version, replaced by a fixed one when hashing). The expected digests were computed from the code before the throughput changes
 * (issue 18, at commit 98ee07e) and are committed here: any byte that moves fails the test, naming the stage.
 */

const expected: Record<string, string> = {
  collect: '9bdc888c26de224356f734957a48cba8dbe5c35f8384969b8dbc6bd8406e6a66',
  augment: 'b873f0abd3c2812af53c1c89141c45536ddb706df73ada93325c0c283e7e5993',
  shard: 'd4c3dfeca63ec6faffa5503f847a282b7f6fc6d0c98342beba3c868530c560f2',
};

/** The checkout's URL, which collect records for the sample harness: replaced so the digests hold in any clone. */
const checkout = pathToFileURL(join(__dirname, '..')).href;

async function digestOf(store: MemoryArtifactStore, prefix: string): Promise<{ digest: string; keys: string[] }> {
  const hash = createHash('sha256');
  const keys: string[] = [];
  for await (const object of store.list(`${prefix}/`)) {
    // Resume markers hold a hash of the part input (with the checkout path): not output.
    if (object.key.includes('/_state/')) continue;
    keys.push(object.key);
    const bytes = await store.getBuffer(object.key);
    hash.update(`${object.key}\n`);
    hash.update(
      object.key.endsWith('.gz')
        ? bytes
        : bytes
            .toString('utf8')
            .replaceAll(checkout, 'file:///checkout')
            .replaceAll(`"${codeVersion}"`, `"${version}+golden"`),
    );
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
    const collected = (
      await runStageLocally(
        collectStage,
        { generate: { count: 60, seed: 'golden', itemCount: 500 }, tasksPerPart: 25 },
        { ...options, outputPrefix: 'collect' },
      )
    ).output as { manifestUri: string };
    const augmented = (
      await runStageLocally(
        augmentStage,
        { inputs: [collected.manifestUri], variantsPerTrajectory: 1, recordsPerPart: 25 },
        { ...options, outputPrefix: 'augment' },
      )
    ).output as {
      manifestUri: string;
    };
    await runStageLocally(
      shardStage,
      {
        inputs: [collected.manifestUri, augmented.manifestUri],
        tokenizer: { preset: 'qwen3' },
        sequenceLength: 8192,
        recordsPerPart: 40,
        renderDate: '2025-01-02T03:04:05Z',
      },
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
