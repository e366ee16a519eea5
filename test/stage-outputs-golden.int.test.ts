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
 * bytes; manifests record the code version, replaced by a fixed one when hashing). The expected
 * digests were first computed from the code before the throughput changes (issue 18, at commit
 * 98ee07e), scratch files included; since the shard's scratch layout changed (parts hand the
 * fan-in serialized export bodies instead of conversations) they cover output only, computed
 * with this normalization on the code at 072486e, which still matched the 98ee07e digests. Any
 * byte of output that moves fails the test, naming the stage.
 */

const expected: Record<string, string> = {
  collect: 'a9f628e9084fe3cbf4d3923c81bc604d25db36bf535dc70fb085494a728c6da6',
  augment: '7fc974d9cfa870a32e99074ae5aec8d1b90eee6a271dbc4bf9cecb930fadefec',
  // #34 moved shard output on purpose: folded_hook_messages in every export (JSONL field, verl
  // column, packed list) and the dataset card's lines about it; collect and augment unchanged.
  shard: 'ddcf3afd57e2ca30462adfae3f3250dbbfe3ad2efd2ae2c1e56b4a7ff856af37',
};

/** The checkout's URL, which collect records for the sample harness: replaced so the digests hold in any clone. */
const checkout = pathToFileURL(join(__dirname, '..')).href;

/**
 * Text outputs with what may differ between clones or scratch layouts replaced: the checkout's
 * URL, the code version, and the fingerprint of the parts' scratch files (`partsHash`, in
 * stats.json and the manifest's stats, and so the size and sha256 the manifest lists for
 * stats.json; stats.json itself is hashed with it masked).
 */
function normalized(key: string, text: string): string {
  const masked = text
    .replaceAll(checkout, 'file:///checkout')
    .replaceAll(`"${codeVersion()}"`, `"${version}+golden"`)
    .replace(/"partsHash": ?"[0-9a-f]{64}"/g, '"partsHash":"scratch"');
  if (!key.endsWith('/manifest.json')) return masked;
  const manifest = JSON.parse(masked) as { objects: Array<{ key: string; sha256?: string; bytes?: number }> };
  for (const object of manifest.objects)
    if (object.key.endsWith('/stats.json') && masked.includes('"partsHash":"scratch"')) {
      object.sha256 = 'scratch';
      object.bytes = 0;
    }
  return JSON.stringify(manifest, null, 2);
}

async function digestOf(store: MemoryArtifactStore, prefix: string): Promise<{ digest: string; keys: string[] }> {
  const hash = createHash('sha256');
  const keys: string[] = [];
  for await (const object of store.list(`${prefix}/`)) {
    // Resume markers hold a hash of the part input (with the checkout path), and `_parts/` holds
    // the scratch files parts hand to the fan-in: neither is output (no manifest lists them), and
    // the scratch layout may change for speed.
    if (object.key.includes('/_state/') || object.key.includes('/_parts/')) continue;
    keys.push(object.key);
    const bytes = await store.getBuffer(object.key);
    hash.update(`${object.key}\n`);
    hash.update(object.key.endsWith('.gz') ? bytes : normalized(object.key, bytes.toString('utf8')));
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
