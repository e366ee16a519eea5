import fc from 'fast-check';
import { snappyCompress } from './snappy';

// The reference: hyparquet-writer's own compressor, whose bytes the shard stage's files are pinned to.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded through require(esm)
const reference = require('hyparquet-writer/src/snappy.js') as { snappyCompress(input: Uint8Array): Uint8Array };

function same(input: Uint8Array): void {
  expect(Buffer.from(snappyCompress(input)).equals(Buffer.from(reference.snappyCompress(input)))).toBe(true);
}

/** Token ids as little-endian int32 bytes: mostly small ids, long runs of one pad id, as packed shards are. */
function tokenBytes(length: number, seed: number): Uint8Array {
  const ids = new Int32Array(length);
  let state = seed;
  const next = () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 8) % 1000;
  for (let index = 0; index < length; index++)
    ids[index] = index > length * 0.6 ? 151643 : next() < 700 ? next() : next() * 151;
  return new Uint8Array(ids.buffer);
}

describe('snappyCompress', () => {
  it('writes the bytes hyparquet-writer writes on arbitrary input', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => same(bytes)),
      { numRuns: 500 },
    );
  });

  it('writes the same bytes on repetitive input (copies of every length and offset form)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 200 })), {
          maxLength: 30,
        }),
        (pieces) => same(Buffer.concat(pieces.map(([piece, times]) => Buffer.concat(Array(times).fill(piece))))),
      ),
      { numRuns: 300 },
    );
  });

  it('writes the same bytes at the size edges and on long inputs (offsets near 65,535, long literals)', () => {
    for (const length of [0, 1, 2, 14, 15, 16, 17, 60, 61, 255, 256, 257, 65535, 65536, 65537, 70_000])
      same(tokenBytes(Math.ceil(length / 4), length).subarray(0, length));
    const random = new Uint8Array(300_000);
    for (let index = 0; index < random.length; index++) random[index] = (index * 2654435761) >>> 24;
    same(random);
    same(new Uint8Array(1 << 20));
    same(tokenBytes(8192 * 64, 7));
    const far = new Uint8Array(200_000);
    far.set(tokenBytes(2000, 3), 0);
    far.set(tokenBytes(2000, 3), 65_530);
    far.set(tokenBytes(2000, 3), 131_070);
    same(far);
  });
});
