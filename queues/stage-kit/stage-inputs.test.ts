import { gzipSync } from 'node:zlib';
import { z } from 'zod';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { setLargestRecordBytes, defaultLargestRecordBytes } from '../../shared/artifacts/record-limit';
import { errorCodeOf } from '../../shared/errors';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { PythonFloat, pythonJson } from '../../shared/text/python-values';
import { toolSpecSchema } from '../../shared/trajectory/messages';
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

  it('keeps float-ness in the fields a stage renders (tools), so a schema\'s "minimum": 1.0 prints 1.0 as Python does', async () => {
    const tools =
      '[{"type":"function","function":{"name":"count","parameters":{"type":"object","properties":' +
      '{"n":{"type":"number","minimum":1.0,"maximum":1e16,"default":2}}}}}]';
    const line = `{"id":"t1","messages":[{"role":"user","content":"1.0?"}],"tools":${tools},"score":1.0}`;
    await store.put('floats.jsonl', Buffer.from(`${line}\n`));
    const uri = store.uriOf('floats.jsonl');
    const plain = await readRecordRange(openObject, uri, z.object({ tools: z.array(z.unknown()) }).loose());
    expect(pythonJson(plain.records[0].tools)).toContain('"minimum": 1,');
    const kept = await readRecordRange(
      openObject,
      uri,
      z.object({ tools: z.array(z.unknown()) }).loose(),
      0,
      undefined,
      undefined,
      {
        keepFloatsIn: ['tools'],
      },
    );
    expect(pythonJson(kept.records[0].tools)).toContain('"minimum": 1.0, "maximum": 1e+16, "default": 2}');
    // Only the named fields: the rest of the record is JSON.parse's.
    expect((kept.records[0] as Record<string, unknown>).score).toBe(1);
    // Through the trajectories' tool schema too (its parameters are any JSON).
    const [tool] = z.array(toolSpecSchema).parse(kept.records[0].tools);
    expect((tool.function.parameters.properties as { n: { minimum: unknown } }).n.minimum).toEqual(new PythonFloat(1));
  });

  it('refuses a task, relabel or part file that is not UTF-8 with its line and byte offset (was read with U+FFFD)', async () => {
    const latin1 = Buffer.concat([Buffer.from('{"id":"a"}\n{"id":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]);
    await store.put('latin1.jsonl.gz', gzipSync(latin1));
    const error = await readRecordRange(openObject, store.uriOf('latin1.jsonl.gz'), schema).then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    expect(errorCodeOf(error)).toBe('BAD_ENCODING');
    expect(error?.message).toContain(
      `${store.uriOf('latin1.jsonl.gz')}: line 2: byte 11 of the line (byte offset 21 of the file) is not valid UTF-8`,
    );
  });

  it('refuses a line longer than the largest record size, naming the file, the line and the setting', async () => {
    await store.put('long.jsonl', Buffer.from(`{"id":"a"}\n{"id":"${'x'.repeat(200)}"}\n`));
    setLargestRecordBytes(100);
    try {
      await expect(readRecordRange(openObject, store.uriOf('long.jsonl'), schema)).rejects.toThrow(
        `[RECORD_TOO_LARGE] ${store.uriOf('long.jsonl')}: line 2 is longer than the largest record size, 100 bytes (HAT_MAX_RECORD_BYTES)`,
      );
    } finally {
      setLargestRecordBytes(defaultLargestRecordBytes);
    }
    expect((await readRecordRange(openObject, store.uriOf('long.jsonl'), schema)).records).toHaveLength(2);
  });
});
