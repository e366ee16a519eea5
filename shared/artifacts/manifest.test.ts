import { errorCodeOf } from '../errors';
import { codeVersion } from '../version';
import { stageManifestKey, stagePartKey } from './artifact-layout';
import { writeJsonl } from './jsonl-writer';
import { manifestObjectOf, readManifest, stageOutputComplete, writeManifest, type ManifestInput } from './manifest';
import { MemoryArtifactStore } from './memory-artifact-store';

const fixedClock = () => new Date('2025-01-02T03:04:05.000Z');

async function writeStageOutput(store: MemoryArtifactStore) {
  const parts = [];
  for (const part of ['part-0001', 'part-0000']) {
    const result = await writeJsonl(store, stagePartKey('run-1', 'collect', part, 'jsonl.gz'), [
      { part, n: 1 },
      { part, n: 2 },
    ]);
    parts.push(manifestObjectOf(result, { schemaVersion: 1, format: 'jsonl.gz' }));
  }
  const input: ManifestInput = {
    stage: 'collect',
    runId: 'run-1',
    objects: parts,
    lineage: { inputs: [{ uri: 'memory://test/tasks.jsonl.gz', sha256: 'a'.repeat(64) }], configHash: 'c0ffee' },
    stats: { trajectories: 4, passRate: 0.75 },
  };
  return input;
}

describe('manifests', () => {
  it('round-trips, lists objects in key order and fills in version, time and code version', async () => {
    const store = new MemoryArtifactStore();
    const input = await writeStageOutput(store);
    const key = stageManifestKey('run-1', 'collect');
    expect(key).toBe('runs/run-1/collect/manifest.json');
    const { manifest, info } = await writeManifest(store, key, input, { clock: fixedClock });
    expect(manifest.objects.map((object) => object.key)).toEqual([
      'runs/run-1/collect/part-0000.jsonl.gz',
      'runs/run-1/collect/part-0001.jsonl.gz',
    ]);
    expect(manifest).toMatchObject({
      schemaVersion: 1,
      createdAt: '2025-01-02T03:04:05.000Z',
      lineage: { codeVersion: codeVersion(), configHash: 'c0ffee' },
    });
    expect(manifest.objects[0]).toMatchObject({
      records: 2,
      format: 'jsonl.gz',
      schemaVersion: 1,
      uri: 'memory://test/runs/run-1/collect/part-0000.jsonl.gz',
    });
    expect(info.uri).toBe('memory://test/runs/run-1/collect/manifest.json');
    expect(await readManifest(store, key)).toEqual(manifest);
  });

  it('is byte-identical for the same input and clock', async () => {
    const store = new MemoryArtifactStore();
    const input = await writeStageOutput(store);
    const first = await writeManifest(store, 'm1.json', input, { clock: fixedClock });
    const second = await writeManifest(
      store,
      'm2.json',
      { ...input, objects: [...input.objects].reverse() },
      { clock: fixedClock },
    );
    expect(second.info.sha256).toBe(first.info.sha256);
  });

  it('refuses to vouch for objects that are not there', async () => {
    const store = new MemoryArtifactStore();
    const input = await writeStageOutput(store);
    await store.delete('runs/run-1/collect/part-0001.jsonl.gz');
    const error = await writeManifest(store, 'runs/run-1/collect/manifest.json', input).catch(
      (rejection: unknown) => rejection as Error,
    );
    expect(errorCodeOf(error)).toBe('MANIFEST_OBJECT_MISSING');
    expect((error as Error).message).toContain('memory://test/runs/run-1/collect/part-0001.jsonl.gz');
    expect(await store.head('runs/run-1/collect/manifest.json')).toBeUndefined();
  });

  it('tells a complete stage output from a missing or partial one', async () => {
    const store = new MemoryArtifactStore();
    const key = stageManifestKey('run-1', 'collect');
    const input = await writeStageOutput(store);
    expect(await stageOutputComplete(store, key)).toBeUndefined();
    const { manifest } = await writeManifest(store, key, input, { clock: fixedClock });
    expect(await stageOutputComplete(store, key)).toEqual(manifest);
    await store.put('runs/run-1/collect/part-0000.jsonl.gz', 'truncated');
    expect(await stageOutputComplete(store, key)).toBeUndefined();
    await store.delete('runs/run-1/collect/part-0000.jsonl.gz');
    expect(await stageOutputComplete(store, key)).toBeUndefined();
  });

  it('reports every problem of an invalid manifest with its field path', async () => {
    const store = new MemoryArtifactStore();
    await store.put(
      'bad.json',
      JSON.stringify({
        schemaVersion: 1,
        stage: 'collect',
        objects: [{ key: 'x', uri: 'u', sha256: 'nothex', bytes: -1, schemaVersion: 1, format: 'jsonl.gz' }],
        lineage: { inputs: [], configHash: 'c', codeVersion: 'v' },
        createdAt: 'yesterday',
      }),
    );
    const error = await readManifest(store, 'bad.json').catch((rejection: unknown) => rejection as Error);
    expect(errorCodeOf(error)).toBe('BAD_MANIFEST');
    const message = (error as Error).message;
    expect(message).toContain('(4 problems)');
    for (const path of ['runId', 'objects[0].sha256', 'objects[0].bytes', 'createdAt'])
      expect(message).toContain(`memory://test/bad.json: ${path}: `);

    await store.put(
      'latin1.json',
      Buffer.concat([Buffer.from('{"stage":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]),
    );
    await expect(readManifest(store, 'latin1.json')).rejects.toThrow(
      /^\[BAD_ENCODING\] memory:\/\/test\/latin1\.json: line 1: byte 14 of the line \(byte offset 13 of the file\) is not valid UTF-8/,
    );

    await store.put('garbage.json', '{"schemaVersion":');
    await expect(readManifest(store, 'garbage.json')).rejects.toThrow(
      /^\[BAD_MANIFEST\] memory:\/\/test\/garbage\.json: not valid JSON/,
    );
  });
});
