import fc from 'fast-check';
import { decodeParquet, encodeParquetColumns, type ParquetColumn } from './parquet-codec';

const columns: ParquetColumn[] = [
  { name: 'input_ids', type: { list: 'INT32' } },
  { name: 'labels', type: { list: 'INT32' } },
  { name: 'source_ids', type: { list: 'STRING' } },
  { name: 'num_tokens', type: 'INT32' },
];

/** Encodes the same rows with the list values as Int32Array (the direct chunk writer) and as plain arrays (hyparquet-writer's writeColumn). */
function bothWays(lengths: number[], rowGroupSize: number, seed: number) {
  const total = lengths.reduce((sum, length) => sum + length, 0);
  const ids = new Int32Array(total);
  const labels = new Int32Array(total);
  for (let index = 0; index < total; index++) {
    ids[index] = (Math.imul(index + seed, 2654435761) >>> 12) % 151_936;
    labels[index] = index % 7 < 3 ? -100 : ids[index];
  }
  const rest = {
    source_ids: lengths.map((length, row) => (length % 3 === 0 ? [] : [`s${row}`, `s${row}@2`])),
    num_tokens: lengths,
  };
  const options = { metadata: { 'hat.split': 'train' }, rowGroupSize };
  const direct = encodeParquetColumns(
    columns,
    { input_ids: { values: ids, lengths }, labels: { values: labels, lengths }, ...rest },
    options,
  );
  const viaLibrary = encodeParquetColumns(
    columns,
    { input_ids: { values: Array.from(ids), lengths }, labels: { values: Array.from(labels), lengths }, ...rest },
    options,
  );
  return { direct, viaLibrary, ids, labels };
}

describe('list<int32> column chunks written directly', () => {
  it("are the same bytes as hyparquet-writer's for any row lengths and row-group size", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 16 }),
        fc.integer({ min: 0, max: 1000 }),
        (lengths, rowGroupSize, seed) => {
          const { direct, viaLibrary } = bothWays(lengths, rowGroupSize, seed);
          expect(Buffer.from(direct).equals(Buffer.from(viaLibrary))).toBe(true);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('are the same bytes for packed-shard sized rows, and read back as the values written', async () => {
    const lengths = Array.from({ length: 70 }, () => 8192);
    const { direct, viaLibrary, ids, labels } = bothWays(lengths, 64, 11);
    expect(Buffer.from(direct).equals(Buffer.from(viaLibrary))).toBe(true);
    const rows = await decodeParquet(direct);
    expect(rows).toHaveLength(70);
    expect(rows[69].input_ids).toEqual(Array.from(ids.subarray(69 * 8192)));
    expect(rows[3].labels).toEqual(Array.from(labels.subarray(3 * 8192, 4 * 8192)));
  });

  it('leave rows with an empty list to hyparquet-writer (same output either way)', () => {
    const { direct, viaLibrary } = bothWays([3, 5, 0, 2], 2, 1);
    expect(Buffer.from(direct).equals(Buffer.from(viaLibrary))).toBe(true);
  });
});
