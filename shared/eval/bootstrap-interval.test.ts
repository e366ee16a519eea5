import { bootstrapMean, pairedDifference, percentileOfSorted } from './bootstrap-interval';

describe('bootstrap intervals', () => {
  it('interpolates percentiles linearly between ranks', () => {
    expect(percentileOfSorted([0, 10, 20, 30], 0.5)).toBe(15);
    expect(percentileOfSorted([0, 10, 20, 30], 0.025)).toBeCloseTo(0.75, 9);
  });

  it('gives the mean with an interval around it, the same under the same seed and a point for constant scores', () => {
    const values = Array.from({ length: 200 }, (_, index) => (index % 4 === 0 ? 0 : 100));
    const first = bootstrapMean(values, 1000, 'a');
    expect(first.score).toBe(75);
    expect(first.low).toBeLessThan(75);
    expect(first.high).toBeGreaterThan(75);
    // Binomial standard error at p = 0.75, n = 200 is about 3.1 points: the interval spans about ±6.
    expect(first.high - first.low).toBeGreaterThan(8);
    expect(first.high - first.low).toBeLessThan(16);
    expect(bootstrapMean(values, 1000, 'a')).toEqual(first);
    expect(bootstrapMean([100, 100, 100], 500, 'b')).toEqual({ score: 100, low: 100, high: 100, items: 3 });
  });

  it('pairs items: a constant per-item advantage has a zero-width interval however noisy the items', () => {
    const a = Array.from({ length: 50 }, (_, index) => (index * 37) % 100);
    const b = a.map((value) => value - 2);
    expect(pairedDifference(a, b, 500, 'p')).toEqual({ score: 2, low: 2, high: 2, items: 50 });
  });
});
