import { gzipSync } from 'node:zlib';
import { z } from 'zod';
import { errorCodeOf } from '../errors';
import { firstInvalidUtf8Byte, readJsonl } from './jsonl-reader';
import { MemoryArtifactStore } from './memory-artifact-store';
import { defaultLargestRecordBytes, setLargestRecordBytes } from './record-limit';

async function readAll(store: MemoryArtifactStore, key: string): Promise<unknown[]> {
  const records: unknown[] = [];
  for await (const record of readJsonl(store, key)) records.push(record);
  return records;
}

describe('readJsonl and encodings', () => {
  it('reads multi-byte UTF-8 intact, also where a character straddles two stream chunks', async () => {
    const store = new MemoryArtifactStore();
    // Long enough that the gunzip stream hands it over in several chunks.
    const records = Array.from({ length: 4_000 }, (_, index) => ({
      index,
      text: `直播间 🛍️ 优惠券 ${'é'.repeat(index % 7)}`,
    }));
    await store.put('a.jsonl.gz', gzipSync(records.map((record) => JSON.stringify(record)).join('\n')));
    expect(await readAll(store, 'a.jsonl.gz')).toEqual(records);
  });

  it('refuses bytes that are not UTF-8 with the line and byte offset, instead of turning them into U+FFFD', async () => {
    const store = new MemoryArtifactStore();
    // "直播" in GBK: 0xd6 0xb1 happens to be a valid UTF-8 pair; 0xb2 is where it breaks.
    const gbk = Buffer.from([0xd6, 0xb1, 0xb2, 0xa5]);
    const body = Buffer.concat([Buffer.from('{"a":1}\n{"text":"'), gbk, Buffer.from('"}\n')]);
    await store.put('logs.jsonl', body);
    const error = await readAll(store, 'logs.jsonl').then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    expect(errorCodeOf(error)).toBe('BAD_ENCODING');
    expect(error?.message).toBe(
      '[BAD_ENCODING] memory://test/logs.jsonl: line 2: byte 12 of the line (byte offset 19 of the file) is not valid UTF-8; inputs must be UTF-8: convert the file (e.g. `iconv -f GBK -t UTF-8`) rather than let bytes be replaced',
    );
  });

  it('finds the first invalid byte: stray continuation, truncated sequence, overlong form, surrogate', () => {
    expect(firstInvalidUtf8Byte(Buffer.from('abc'))).toBe(3);
    expect(firstInvalidUtf8Byte(Buffer.from([0x61, 0x80]))).toBe(1);
    expect(firstInvalidUtf8Byte(Buffer.from([0x61, 0xe4, 0xbd]))).toBe(1);
    expect(firstInvalidUtf8Byte(Buffer.from([0xc0, 0xaf]))).toBe(0);
    expect(firstInvalidUtf8Byte(Buffer.from([0x61, 0x62, 0xed, 0xa0, 0x80]))).toBe(2);
    expect(firstInvalidUtf8Byte(Buffer.from('直播 ok', 'utf8'))).toBe(Buffer.byteLength('直播 ok'));
  });

  it('refuses a line longer than HAT_MAX_RECORD_BYTES as soon as it passes the limit, before the line ends', async () => {
    const store = new MemoryArtifactStore();
    // No newline at all: a binary file read as JSONL by mistake.
    await store.put('binary.jsonl.gz', gzipSync(Buffer.alloc(2_000_000, 0x41)));
    setLargestRecordBytes(300_000);
    try {
      const error = await readAll(store, 'binary.jsonl.gz').then(
        () => undefined,
        (failure: unknown) => failure as Error,
      );
      expect(errorCodeOf(error)).toBe('RECORD_TOO_LARGE');
      expect(error?.message).toMatch(
        /^\[RECORD_TOO_LARGE\] memory:\/\/\S*binary\.jsonl\.gz: line 1 is longer than the largest record size, 300000 bytes \(HAT_MAX_RECORD_BYTES\); .*raise HAT_MAX_RECORD_BYTES/,
      );
    } finally {
      setLargestRecordBytes(defaultLargestRecordBytes);
    }
  });

  it('refuses a record with a field its schema does not declare (UNKNOWN_FIELD, with its path), instead of dropping it', async () => {
    const store = new MemoryArtifactStore();
    const schema = z.object({ id: z.string(), tags: z.array(z.object({ name: z.string() })).default([]) });
    await store.put('records.jsonl', '{"id":"a"}\n{"id":"b","tags":[{"name":"x","weight":2}],"extra":true}\n');
    const records: unknown[] = [];
    const error = await (async () => {
      for await (const record of readJsonl(store, 'records.jsonl', { schema })) records.push(record);
    })().then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    expect(records).toEqual([{ id: 'a', tags: [] }]);
    expect(errorCodeOf(error)).toBe('UNKNOWN_FIELD');
    expect(error?.message).toBe(
      [
        '[UNKNOWN_FIELD] line 2 of memory://test/records.jsonl has fields its schema does not declare; remove or rename them (a record is refused rather than read without them) (2 problems):',
        '  - memory://test/records.jsonl: line 2: tags[0].weight: not a field of this record',
        '  - memory://test/records.jsonl: line 2: extra: not a field of this record',
      ].join('\n'),
    );
    // A strict schema refuses them itself: the same error.
    const strict = z.strictObject({ id: z.string(), tags: z.array(z.strictObject({ name: z.string() })).default([]) });
    const refused = await (async () => {
      for await (const _record of readJsonl(store, 'records.jsonl', { schema: strict })) void _record;
    })().then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    expect(refused?.message).toBe(error?.message);
  });
});
