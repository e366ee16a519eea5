import fc from 'fast-check';
import { passAtK } from './pass-at-k';

/** pass@k by brute force: the share of k-subsets of n samples (c passing) that hold a passing one. */
function bruteForcePassAtK(n: number, c: number, k: number): number {
  let subsets = 0;
  let hits = 0;
  for (let mask = 0; mask < 1 << n; mask++) {
    let size = 0;
    let hit = false;
    for (let bit = 0; bit < n; bit++) {
      if ((mask >> bit) & 1) {
        size++;
        if (bit < c) hit = true;
      }
    }
    if (size !== k) continue;
    subsets++;
    if (hit) hits++;
  }
  return hits / subsets;
}

describe('pass@k', () => {
  it('matches hand-computed values', () => {
    expect(passAtK(4, 1, 1)).toBeCloseTo(0.25, 12);
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12); // 1 - C(3,2)/C(4,2) = 1 - 3/6
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12); // 1 - C(3,2)/C(5,2) = 1 - 3/10
    expect(passAtK(4, 1, 4)).toBe(1);
    expect(passAtK(8, 0, 3)).toBe(0);
    expect(passAtK(8, 8, 1)).toBe(1);
  });

  it('equals the share of k-subsets holding a passing sample (brute force, n <= 10)', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 10 })
          .chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 0, max: n }), fc.integer({ min: 1, max: n }))),
        ([n, c, k]) => {
          expect(passAtK(n, c, k)).toBeCloseTo(bruteForcePassAtK(n, c, k), 12);
        },
      ),
    );
  });

  it('refuses k > n', () => {
    expect(() => passAtK(3, 1, 4)).toThrow(RangeError);
  });
});
