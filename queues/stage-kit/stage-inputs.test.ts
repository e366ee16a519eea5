import { z } from 'zod';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { readRecordRange } from './stage-inputs';

const schema = z.object({ id: z.string(), count: z.number().int().default(0) });

describe('readRecordRange', () => {
  const store = new MemoryArtifactStore('inputs');
  const openObject = (uri: string) => ({ store, key: store.keyOf(uri) });

  it('checks every record of an object no manifest vouches for, naming the line and field', async () => {
    const written = await writeJsonl(store, 'bad.jsonl.gz', [{ id: 'a' }, { id: 7 }]);
    await expect(readRecordRange(openObject, written.uri, schema)).rejects.toThrow(/line 2.*id/s);
    // A manifest's sha256 for other bytes vouches for nothing: still checked.
    await expect(readRecordRange(openObject, written.uri, schema, 0, undefined, 'f'.repeat(64))).rejects.toThrow(
      /line 2.*id/s,
    );
  });

  it('parses without checking the bytes a manifest lists, which a stage wrote through the schema', async () => {
    const written = await writeJsonl(store, 'good.jsonl.gz', [{ id: 'a' }, { id: 'b', count: 2 }], { schema });
    const checked = await readRecordRange(openObject, written.uri, schema);
    const listed = await readRecordRange(openObject, written.uri, schema, 0, undefined, written.sha256);
    // The writer stored the schema's own output (defaults filled), so both reads give the same records.
    expect(listed).toEqual(checked);
    expect(listed.records).toEqual([
      { id: 'a', count: 0 },
      { id: 'b', count: 2 },
    ]);
    expect((await readRecordRange(openObject, written.uri, schema, 1, 2, written.sha256)).records).toEqual([
      { id: 'b', count: 2 },
    ]);
  });
});
