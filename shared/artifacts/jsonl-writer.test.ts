import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import { errorCodeOf } from '../errors';
import { sha256Hex } from '../hash/hash';
import { readJsonl } from './jsonl-reader';
import { JsonlWriter, writeJsonl } from './jsonl-writer';
import { MemoryArtifactStore } from './memory-artifact-store';

const recordSchema = z.object({
  id: z.string(),
  messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant', 'tool']), content: z.string() })),
});
type TestRecord = z.infer<typeof recordSchema>;

function makeRecords(count: number): TestRecord[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `r${index}`,
    messages: [
      { role: 'user' as const, content: `question ${index} ${'x'.repeat(index % 50)}` },
      { role: 'assistant' as const, content: `answer ${index} — ünïcödé ✓` },
    ],
  }));
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

async function caught(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe('writeJsonl / readJsonl', () => {
  it('round-trips records and reports counts, sizes and the sha256 of the stored bytes', async () => {
    const store = new MemoryArtifactStore();
    const records = makeRecords(5000);
    const result = await writeJsonl(store, 'runs/r1/collect/part-0000.jsonl.gz', records, { schema: recordSchema });
    const stored = await store.getBuffer('runs/r1/collect/part-0000.jsonl.gz');
    const text = gunzipSync(stored).toString('utf8');
    expect(result).toMatchObject({
      key: 'runs/r1/collect/part-0000.jsonl.gz',
      uri: 'memory://test/runs/r1/collect/part-0000.jsonl.gz',
      records: 5000,
    });
    expect(result.bytes).toBe(stored.byteLength);
    expect(result.sha256).toBe(sha256Hex(stored));
    expect(result.uncompressedBytes).toBe(Buffer.byteLength(text));
    expect(text.split('\n')).toHaveLength(5001);
    expect(await collect(readJsonl(store, result.key, { schema: recordSchema }))).toEqual(records);
  });

  it('writes byte-identical objects for the same records, however they arrive', async () => {
    const store = new MemoryArtifactStore();
    const records = makeRecords(3000);
    const first = await writeJsonl(store, 'a.jsonl.gz', records);
    async function* slowly() {
      for (const record of records) {
        await new Promise((resolve) => setImmediate(resolve));
        yield record;
      }
    }
    const second = await writeJsonl(store, 'b.jsonl.gz', slowly());
    expect(second.sha256).toBe(first.sha256);
    expect(Buffer.compare(await store.getBuffer('a.jsonl.gz'), await store.getBuffer('b.jsonl.gz'))).toBe(0);
    // gzip header: no file name, mtime zero.
    const header = (await store.getBuffer('a.jsonl.gz')).subarray(0, 10);
    expect(header.readUInt32LE(4)).toBe(0);
    expect(header[3] & 0x08).toBe(0);
  });

  it('writes an empty object for no records, which reads back as no records', async () => {
    const store = new MemoryArtifactStore();
    const result = await writeJsonl(store, 'empty.jsonl.gz', []);
    expect(result.records).toBe(0);
    expect(await collect(readJsonl(store, 'empty.jsonl.gz'))).toEqual([]);
  });

  it('refuses a record that does not match the schema, naming record and field, and publishes nothing', async () => {
    const store = new MemoryArtifactStore();
    const records: unknown[] = makeRecords(20);
    records[16] = {
      id: 'r16',
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'a' },
        { role: 'robot', content: 'x' },
      ],
    };
    const error = await caught(writeJsonl(store, 'bad.jsonl.gz', records as TestRecord[], { schema: recordSchema }));
    expect(errorCodeOf(error)).toBe('BAD_RECORD');
    expect(error.message).toContain('record 17 written to memory://test/bad.jsonl.gz');
    expect(error.message).toContain('memory://test/bad.jsonl.gz: line 17: messages[2].role: Invalid option');
    expect(await store.head('bad.jsonl.gz')).toBeUndefined();
  });

  it('writes each record with the stringify given, after the schema check', async () => {
    const store = new MemoryArtifactStore();
    const records = makeRecords(3);
    await writeJsonl(store, 'own.jsonl.gz', records, {
      schema: recordSchema,
      stringify: (record) => JSON.stringify({ tag: 'own', id: record.id }),
    });
    const lines = gunzipSync(await store.getBuffer('own.jsonl.gz'))
      .toString('utf8')
      .split('\n');
    expect(lines).toEqual([...records.map((record) => `{"tag":"own","id":"${record.id}"}`), '']);
  });

  it('publishes nothing when the writer is aborted or its source fails', async () => {
    const store = new MemoryArtifactStore();
    const writer = JsonlWriter.open(store, 'aborted.jsonl.gz');
    for (const record of makeRecords(100)) await writer.write(record);
    await writer.abort(new Error('worker shutting down'));
    expect(await store.head('aborted.jsonl.gz')).toBeUndefined();
    await expect(writer.close()).rejects.toThrow('worker shutting down');

    async function* failing() {
      yield* makeRecords(10);
      throw new Error('model endpoint went away');
    }
    await expect(writeJsonl(store, 'failed.jsonl.gz', failing())).rejects.toThrow('model endpoint went away');
    expect(await store.head('failed.jsonl.gz')).toBeUndefined();
  });

  it('names the URI, line and field path of a stored record that does not match the schema', async () => {
    const store = new MemoryArtifactStore();
    const lines = makeRecords(20).map((record) => JSON.stringify(record));
    lines[16] = JSON.stringify({
      id: 'r16',
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'a' },
        { role: 'robot', content: 'x' },
      ],
    });
    await store.put('p/x.jsonl.gz', gzipSync(`${lines.join('\n')}\n`));
    const read = collect(readJsonl(store, 'p/x.jsonl.gz', { schema: recordSchema }));
    const error = await caught(read);
    expect(errorCodeOf(error)).toBe('BAD_RECORD');
    expect(error.message).toContain(
      'memory://test/p/x.jsonl.gz: line 17: messages[2].role: Invalid option: expected one of',
    );
  });

  it('counts blank lines in line numbers and reports invalid JSON with its line', async () => {
    const store = new MemoryArtifactStore();
    await store.put('plain.jsonl', '{"a":1}\r\n\n{"a":2}\n{"a":\n');
    const seen: unknown[] = [];
    const error = await caught(
      (async () => {
        for await (const record of readJsonl(store, 'plain.jsonl')) seen.push(record);
      })(),
    );
    expect(seen).toEqual([{ a: 1 }, { a: 2 }]);
    expect(errorCodeOf(error)).toBe('BAD_JSONL');
    expect(error.message).toMatch(/^\[BAD_JSONL\] memory:\/\/test\/plain\.jsonl: line 4: not valid JSON/);
  });

  it('reads a last line without a trailing newline, and multi-byte characters split across chunks', async () => {
    const store = new MemoryArtifactStore();
    const records = Array.from({ length: 2000 }, (_, index) => ({ text: `✓ü${'é'.repeat(index % 97)}` }));
    await store.put('u.jsonl.gz', gzipSync(records.map((record) => JSON.stringify(record)).join('\n')));
    expect(await collect(readJsonl(store, 'u.jsonl.gz'))).toEqual(records);
  });

  it('reports data that is not gzip as BAD_JSONL', async () => {
    const store = new MemoryArtifactStore();
    await store.put('nope.jsonl.gz', '{"a":1}\n');
    const error = await caught(collect(readJsonl(store, 'nope.jsonl.gz')));
    expect(errorCodeOf(error)).toBe('BAD_JSONL');
    expect(error.message).toContain('memory://test/nope.jsonl.gz: not valid gzip data');
  });

  it('reports a missing object as ARTIFACT_NOT_FOUND', async () => {
    const error = await caught(collect(readJsonl(new MemoryArtifactStore(), 'missing.jsonl.gz')));
    expect(errorCodeOf(error)).toBe('ARTIFACT_NOT_FOUND');
  });
});

describe('JsonlWriter with records as bytes and as values mixed', () => {
  it('keeps their order and gives the bytes one JSON.stringify per line would', async () => {
    const store = new MemoryArtifactStore('mixed');
    const writer = JsonlWriter.open<Record<string, unknown>>(store, 'mixed.jsonl.gz');
    const expected: string[] = [];
    for (let index = 0; index < 3000; index++) {
      const record = { index, text: 'x'.repeat((index * 7919) % 900), 中: '文' };
      const json = JSON.stringify(record);
      expected.push(json);
      if (index % 3 === 0) await writer.write(record);
      else if (index % 3 === 1) await writer.writeJsonBytes(Buffer.from(json));
      else await writer.writeJsonBytes(Buffer.from(json.slice(0, 10)), Buffer.from(json.slice(10)));
    }
    const result = await writer.close();
    expect(result.records).toBe(3000);
    const text = gunzipSync(await store.getBuffer('mixed.jsonl.gz')).toString('utf8');
    expect(text).toBe(`${expected.join('\n')}\n`);
  });
});
