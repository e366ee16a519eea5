import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, writeManifest } from '../../shared/artifacts/manifest';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { defaultLargestRecordBytes, setLargestRecordBytes } from '../../shared/artifacts/record-limit';
import { expandInputs } from '../../queues/stage-kit/stage-inputs';
import { readRecordedSessions } from './read-recorded-sessions';
import { syntheticSessions } from './testing/synthetic-sessions';

describe('readRecordedSessions', () => {
  const store = new MemoryArtifactStore('replay-inputs');
  const openObject = (uri: string) => ({ store, key: store.keyOf(uri) });

  it('reads the trajectory objects a stage manifest lists, in order, with their sha256 for lineage', async () => {
    const first = await writeJsonl(store, 'collect/part-00000.jsonl.gz', syntheticSessions({ count: 2, prefix: 'a' }));
    const second = await writeJsonl(store, 'collect/part-00001.jsonl.gz', syntheticSessions({ count: 3, prefix: 'b' }));
    const tasks = await writeJsonl(store, 'collect/tasks/part-00000.jsonl.gz', [{ id: 'task-1' }]);
    const report = await store.put('collect/report.json', '{}');
    await writeManifest(store, 'collect/manifest.json', {
      stage: 'collect',
      runId: 'r1',
      objects: [
        manifestObjectOf(first, { schemaVersion: 1, format: 'jsonl.gz', kind: 'trajectories' }),
        manifestObjectOf(tasks, { schemaVersion: 1, format: 'jsonl.gz', kind: 'tasks' }),
        manifestObjectOf(second, { schemaVersion: 1, format: 'jsonl.gz', kind: 'trajectories' }),
        manifestObjectOf(report, { schemaVersion: 1, format: 'json', kind: 'report' }),
      ],
      lineage: { inputs: [], configHash: 'x' },
    });
    const read = await readRecordedSessions([store.uriOf('collect/manifest.json')], openObject);
    expect(read.sessions.map((session) => session.id)).toEqual(['a-0000', 'a-0001', 'b-0000', 'b-0001', 'b-0002']);
    expect(read.objects).toEqual([
      { uri: first.uri, sha256: first.sha256 },
      { uri: second.uri, sha256: second.sha256 },
    ]);
    expect(read.unreplayable).toEqual([]);
    expect(
      await expandInputs([store.uriOf('collect/manifest.json')], openObject, 'replay.live.tasks', 'tasks'),
    ).toEqual([{ uri: tasks.uri, records: tasks.records, sha256: tasks.sha256 }]);
  });

  it('refuses a missing input and a .gz object that is not gzip, naming them', async () => {
    await expect(readRecordedSessions([store.uriOf('nowhere.jsonl')], openObject)).rejects.toThrow(
      /\[MISSING_INPUT\] replay\.inputs: .*nowhere\.jsonl does not exist/,
    );
    await store.put('plain.jsonl.gz', '{"id":"x"}\n');
    await expect(readRecordedSessions([store.uriOf('plain.jsonl.gz')], openObject)).rejects.toThrow(
      /\[BAD_JSONL\].*plain\.jsonl\.gz: not valid gzip/,
    );
  });

  it('refuses a session file with a byte that is not UTF-8, naming the file, line and byte offset, instead of replaying U+FFFD', async () => {
    const [session] = syntheticSessions({ count: 1, prefix: 'latin' });
    const line = Buffer.from(JSON.stringify(session));
    const at = line.indexOf('How much');
    const bytes = Buffer.concat([
      Buffer.from('\n'),
      line.subarray(0, at),
      Buffer.from([0xe9]),
      line.subarray(at),
      Buffer.from('\n'),
    ]);
    await store.put('latin.jsonl', bytes);
    await expect(readRecordedSessions([store.uriOf('latin.jsonl')], openObject)).rejects.toThrow(
      `[BAD_ENCODING] ${store.uriOf('latin.jsonl')}: line 2: byte ${at + 1} of the line (byte offset ${at + 1} of the file) is not valid UTF-8`,
    );
  });

  it('refuses a session line longer than the largest record size (RECORD_TOO_LARGE)', async () => {
    setLargestRecordBytes(1000);
    try {
      await writeJsonl(store, 'long.jsonl.gz', syntheticSessions({ count: 1, prefix: 'long' }));
      await expect(readRecordedSessions([store.uriOf('long.jsonl.gz')], openObject)).rejects.toThrow(
        `[RECORD_TOO_LARGE] ${store.uriOf('long.jsonl.gz')}: line 1 is longer than the largest record size, 1000 bytes (HAT_MAX_RECORD_BYTES)`,
      );
    } finally {
      setLargestRecordBytes(defaultLargestRecordBytes);
    }
  });
});
