import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { decodeParquet } from '../../shared/artifacts/parquet-codec';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { PackedShardEncoder, type PackedShardRequest } from './packed-shard';
import { encodeTokens } from './part-files';
import { SpilledTokens } from './token-files';

/** The parts' token files as the fan-in spills them, from ids in memory. */
async function spill(parts: Int32Array[]): Promise<SpilledTokens> {
  const store = new MemoryArtifactStore();
  for (const [index, ids] of parts.entries()) await store.put(`${index}.tokens.bin`, encodeTokens(ids));
  return SpilledTokens.spill(
    store,
    parts.map((ids, index) => ({ key: `${index}.tokens.bin`, tokens: ids.length })),
  );
}

describe('PackedShardEncoder', () => {
  const tokens = [Int32Array.from({ length: 500 }, (_, index) => 1000 + index), Int32Array.from([7, 8, 9, 10, 11])];
  const request = (length: number): PackedShardRequest => ({
    sequences: [
      [
        { part: 0, offset: 0, count: 300, spans: [[250, 300]], sourceId: 'a', foldedHookMessages: 2 },
        { part: 1, offset: 1, count: 3, spans: [[1, 3]], sourceId: 'b' },
      ],
      [{ part: 0, offset: 300, count: 200, spans: [], sourceId: 'c@2' }],
    ],
    sequenceLength: length,
    padTokenId: 0,
    metadata: { 'hat.split': 'train' },
  });

  it('encodes the same bytes on its thread as in this one, in the order asked, and the rows hold the samples', async () => {
    const files = await spill(tokens);
    const threaded = new PackedShardEncoder(files.files, true);
    const local = new PackedShardEncoder(files.files, false);
    try {
      expect(threaded.threaded).toBe(true);
      const [first, second] = await Promise.all([threaded.encode(request(512)), threaded.encode(request(1024))]);
      const expected = [await local.encode(request(512)), await local.encode(request(1024))];
      expect(Buffer.from(first.bytes).equals(Buffer.from(expected[0].bytes))).toBe(true);
      expect(Buffer.from(second.bytes).equals(Buffer.from(expected[1].bytes))).toBe(true);
      expect({ tokens: first.tokens, trained: first.trainedTokens }).toEqual({ tokens: 503, trained: 52 });
      const rows = await decodeParquet(first.bytes);
      expect((rows[0].input_ids as number[]).slice(299, 304)).toEqual([1299, 8, 9, 10, 0]);
      expect(rows[1].source_ids).toEqual(['c@2']);
      // Per sample beside source_ids: the hook messages its rendering folded (0 when none or not given).
      expect(rows.map((row) => row.folded_hook_messages)).toEqual([[2, 0], [0]]);
    } finally {
      await threaded.close();
      await local.close();
      files.close();
    }
  }, 60_000);

  it('fails a shard that names tokens a part does not hold, and keeps working after', async () => {
    const files = await spill(tokens);
    const encoder = new PackedShardEncoder(files.files, true);
    try {
      await expect(
        encoder.encode({ ...request(512), sequences: [[{ part: 3, offset: 0, count: 1, spans: [], sourceId: 'x' }]] }),
      ).rejects.toThrow(/PACKING_FAILED.*part 3/);
      await expect(
        encoder.encode({ ...request(512), sequences: [[{ part: 1, offset: 4, count: 2, spans: [], sourceId: 'x' }]] }),
      ).rejects.toThrow(/PACKING_FAILED.*part 1 holds fewer tokens/);
      await expect(encoder.encode(request(512))).resolves.toMatchObject({ tokens: 503 });
    } finally {
      await encoder.close();
      files.close();
    }
  });

  it('refuses a part whose token file holds another number of ids than the part recorded, and leaves no file behind', async () => {
    const store = new MemoryArtifactStore();
    await store.put('0.tokens.bin', encodeTokens(tokens[1]));
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith('hat-shard-tokens-')).length;
    await expect(SpilledTokens.spill(store, [{ key: '0.tokens.bin', tokens: 6 }])).rejects.toThrow(
      /PART_OUTPUT_DAMAGED.*0\.tokens\.bin holds 5 tokens, its part recorded 6; rerun the stage/,
    );
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('hat-shard-tokens-'))).toHaveLength(before);
  });
});
