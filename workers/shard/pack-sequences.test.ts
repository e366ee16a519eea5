import fc from 'fast-check';
import { fillUpperBound, packBestFitDecreasing, writeSequence } from './pack-sequences';

const loads = (sizes: number[], bins: number[][]) => bins.map((bin) => bin.reduce((sum, item) => sum + sizes[item], 0));

describe('packBestFitDecreasing', () => {
  test('places every item once, never overfills, and leaves no two bins that could be merged', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 8, max: 4096 })
          .chain((capacity) =>
            fc.tuple(fc.constant(capacity), fc.array(fc.integer({ min: 1, max: capacity }), { maxLength: 300 })),
          ),
        ([capacity, sizes]) => {
          const bins = packBestFitDecreasing(sizes, capacity);
          expect(bins.flat().sort((a, b) => a - b)).toEqual(sizes.map((_, index) => index));
          const filled = loads(sizes, bins);
          for (const load of filled) expect(load).toBeLessThanOrEqual(capacity);
          // A bin is only opened for an item that fits in no open bin, so any two bins together overflow.
          const sorted = [...filled].sort((a, b) => a - b);
          if (sorted.length >= 2) expect(sorted[0] + sorted[1]).toBeGreaterThan(capacity);
          expect(bins.length).toBeGreaterThanOrEqual(Math.ceil(sizes.reduce((sum, size) => sum + size, 0) / capacity));
          expect(packBestFitDecreasing(sizes, capacity)).toEqual(bins);
        },
      ),
      { numRuns: 200, seed: 3 },
    );
  });

  test('puts each item in the open bin it fills most tightly', () => {
    // 6 and 5 open two bins (4 and 5 left); 4 fills the first exactly rather than the looser one.
    expect(packBestFitDecreasing([6, 5, 4, 3], 10)).toEqual([
      [0, 2],
      [1, 3],
    ]);
    // Ties in size are broken by the given order, then by index.
    const order = ['c', 'a', 'b'];
    expect(packBestFitDecreasing([3, 3, 3], 5, (a, b) => order[a].localeCompare(order[b]))).toEqual([[1], [2], [0]]);
  });

  test('reaches at least 97% fill at 8192 on 5,000 log-uniform lengths that allow it', () => {
    const sizes = Array.from({ length: 5000 }, (_, index) =>
      Math.round(Math.exp(Math.log(200) + (((index * 7919) % 5000) / 5000) * (Math.log(6000) - Math.log(200)))),
    );
    const bins = packBestFitDecreasing(sizes, 8192);
    const fill = sizes.reduce((sum, size) => sum + size, 0) / (bins.length * 8192);
    expect(fill).toBeGreaterThanOrEqual(0.97);
    expect(fill).toBeLessThanOrEqual(fillUpperBound(sizes, 8192));
  });

  test('refuses an item larger than a sequence', () => {
    expect(() => packBestFitDecreasing([5, 11], 10)).toThrow(/item 1 has size 11/);
  });
});

describe('fillUpperBound', () => {
  test('no packing beats it: items above half a sequence each need one, three items above a quarter cannot share', () => {
    expect(fillUpperBound([6, 6, 6], 10)).toBeCloseTo(18 / 30);
    expect(fillUpperBound([3, 3, 3, 3], 10)).toBeCloseTo(12 / 20);
    expect(fillUpperBound([5, 5], 10)).toBe(1);
  });
});

describe('writeSequence', () => {
  test('restarts positions per sample, trains only the spans, pads untrained with positions of their own', () => {
    const columns = {
      inputIds: new Int32Array(12),
      labels: new Int32Array(12),
      lossMask: new Int32Array(12),
      positionIds: new Int32Array(12),
    };
    const result = writeSequence(
      [
        { ids: [11, 12, 13, 14], spans: [[2, 4]], sourceId: 'a' },
        {
          ids: [21, 22, 23],
          spans: [
            [0, 1],
            [2, 3],
          ],
          sourceId: 'b',
        },
      ],
      10,
      0,
      columns,
      2,
    );
    expect(result).toEqual({ cuSeqlens: [0, 4, 7, 10], sourceIds: ['a', 'b'], tokens: 7, trainedTokens: 4 });
    expect(Array.from(columns.inputIds)).toEqual([0, 0, 11, 12, 13, 14, 21, 22, 23, 0, 0, 0]);
    expect(Array.from(columns.positionIds.slice(2))).toEqual([0, 1, 2, 3, 0, 1, 2, 0, 1, 2]);
    expect(Array.from(columns.lossMask.slice(2))).toEqual([0, 0, 1, 1, 1, 0, 1, 0, 0, 0]);
    expect(Array.from(columns.labels.slice(2))).toEqual([-100, -100, 13, 14, 21, -100, 23, -100, -100, -100]);
  });

  test('a full sequence has no padding segment', () => {
    const columns = {
      inputIds: new Int32Array(3),
      labels: new Int32Array(3),
      lossMask: new Int32Array(3),
      positionIds: new Int32Array(3),
    };
    expect(writeSequence([{ ids: [1, 2, 3], spans: [[1, 3]], sourceId: 'x' }], 3, 0, columns, 0).cuSeqlens).toEqual([
      0, 3,
    ]);
  });
});
