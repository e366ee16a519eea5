import fc from 'fast-check';
import { Rng } from '../random/rng';
import { bootstrapPercentileDifference } from './bootstrap';
import { summarizeSamples } from './metric-summary';
import { percentileOfSorted, percentilesOf } from './percentile';
import { decodeFloat64, SampleSet } from './sample-set';

describe('percentilesOf', () => {
  it('matches numpy.percentile (linear) on known values', () => {
    // Values from numpy 1.26: np.percentile(x, q).
    expect(percentilesOf([1, 2, 3, 4], [0, 25, 50, 90, 100])).toEqual([1, 1.75, 2.5, 3.7, 4]);
    expect(percentilesOf([50, 15, 40, 20, 35], [40, 99])).toEqual([29, 49.6]);
    expect(percentilesOf([1000, 2000, 3000, 4000, 9000], [95])).toEqual([7999.999999999999]);
    expect(percentilesOf([7], [50, 99])).toEqual([7, 7]);
    expect(percentilesOf([], [50])[0]).toBeNaN();
  });

  it('returns the upper neighbour exactly at the top of an interval, as numpy does', () => {
    const sorted = Float64Array.from([0.1, 0.7]);
    expect(percentileOfSorted(sorted, 100)).toBe(0.7);
  });

  it('summarizes with the asked percentiles and a sample standard deviation', () => {
    const summary = summarizeSamples([2, 4, 4, 4, 5, 5, 7, 9], [50, 99]);
    expect(summary).toMatchObject({ count: 8, mean: 5, min: 2, max: 9, percentiles: { p50: 4.5 } });
    expect(summary.std).toBeCloseTo(2.138, 3);
    expect(summarizeSamples([], [50])).toEqual({
      count: 0,
      mean: null,
      std: null,
      min: null,
      max: null,
      percentiles: { p50: null },
    });
  });
});

describe('SampleSet', () => {
  const sample = fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { maxLength: 60 });

  it('merged parts give the percentiles of the union, through serialization', () => {
    fc.assert(
      fc.property(
        fc.array(sample, { minLength: 1, maxLength: 5 }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        (parts, p) => {
          const sets = parts.map((values) => {
            const set = new SampleSet();
            set.addAll('ttft_ms', values);
            return SampleSet.fromJSON(JSON.parse(JSON.stringify(set.toJSON())));
          });
          const merged = SampleSet.union(sets);
          const union = parts.flat();
          const expected = percentilesOf(union, [p])[0];
          const actual = percentilesOf(merged.get('ttft_ms'), [p])[0];
          if (union.length === 0) return Number.isNaN(actual);
          return Object.is(actual, expected);
        },
      ),
    );
  });

  it('round-trips values bit for bit and refuses damaged data', () => {
    const set = new SampleSet();
    set.addAll('x', [0.1, -0, 1e-300, 123456.789]);
    const again = SampleSet.fromJSON(set.toJSON());
    expect(Array.from(again.get('x'))).toEqual([0.1, -0, 1e-300, 123456.789]);
    expect(() => decodeFloat64('AAAA', 'report.samples.x')).toThrow(/BAD_SAMPLES.*report\.samples\.x/);
    expect(() => set.add('x', Number.NaN)).toThrow(/not a finite number/);
  });
});

describe('bootstrapPercentileDifference', () => {
  const draw = (rng: Rng, count: number, mean: number) => Array.from({ length: count }, () => rng.normal(mean, 10));

  it('finds a real shift and not a null one, deterministically under a seed', () => {
    const rng = new Rng('bootstrap-data');
    const a = draw(rng, 400, 100);
    const shifted = draw(rng, 400, 115);
    const same = draw(new Rng('bootstrap-data/same'), 400, 100);
    const shift = bootstrapPercentileDifference(a, shifted, 50, { rng: new Rng('b1') });
    expect(shift.significant).toBe(true);
    expect(shift.low).toBeGreaterThan(5);
    expect(shift.difference).toBeGreaterThan(shift.low);
    expect(shift.difference).toBeLessThan(shift.high);
    const none = bootstrapPercentileDifference(a, same, 50, { rng: new Rng('b1') });
    expect(none.significant).toBe(false);
    expect(none.low).toBeLessThan(0);
    expect(none.high).toBeGreaterThan(0);
    expect(bootstrapPercentileDifference(a, shifted, 50, { rng: new Rng('b1') })).toEqual(shift);
  });

  it('switches to order statistics for sample sets too large to resample, with a like interval', () => {
    const rng = new Rng('large');
    const a = draw(rng, 1500, 100);
    const b = draw(rng, 1500, 100.4);
    const resampled = bootstrapPercentileDifference(a, b, 90, { rng: new Rng('r'), resamples: 400 });
    const ranked = bootstrapPercentileDifference(a, b, 90, { rng: new Rng('r'), resamples: 400, workLimit: 1000 });
    expect(resampled.method).toBe('bootstrap');
    expect(ranked).toMatchObject({ method: 'order-statistics', resamples: 0, difference: resampled.difference });
    const width = resampled.high - resampled.low;
    expect(ranked.high - ranked.low).toBeGreaterThan(width * 0.7);
    expect(ranked.high - ranked.low).toBeLessThan(width * 1.4);
  });
});
