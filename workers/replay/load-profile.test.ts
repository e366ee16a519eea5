import { Rng } from '../../shared/random/rng';
import { arrivalOffsetsMs, loadProfileSchema, loadShare } from './load-profile';

describe('open-loop arrivals', () => {
  const gapsOf = (offsets: number[]) => offsets.slice(1).map((offset, index) => offset - offsets[index]);
  const stats = (values: number[]) => {
    const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
    const variance = values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (values.length - 1);
    return { mean, cv: Math.sqrt(variance) / mean };
  };

  it('keep the mean rate whatever the burstiness; burstiness sets the spread (Poisson at 1)', () => {
    for (const [burstiness, expectedCv] of [
      [1, 1],
      [0.25, 2],
      [4, 0.5],
    ] as const) {
      const gaps = gapsOf(arrivalOffsetsMs(8000, 20, burstiness, new Rng(`arrivals-${burstiness}`)));
      const { mean, cv } = stats(gaps);
      expect(mean).toBeGreaterThan(50 * 0.95);
      expect(mean).toBeLessThan(50 * 1.05);
      expect(cv).toBeGreaterThan(expectedCv * 0.9);
      expect(cv).toBeLessThan(expectedCv * 1.1);
    }
  });

  it('are the same for the same seed and start at 0', () => {
    const first = arrivalOffsetsMs(50, 3, 0.5, new Rng('same'));
    expect(first[0]).toBe(0);
    expect(arrivalOffsetsMs(50, 3, 0.5, new Rng('same'))).toEqual(first);
    expect(arrivalOffsetsMs(50, 3, 0.5, new Rng('other'))).not.toEqual(first);
  });
});

describe('loadShare', () => {
  it('splits concurrency as evenly as integers allow and the rate evenly, summing to the whole', () => {
    const closed = loadProfileSchema.parse({ kind: 'closed', concurrency: 10 });
    const shares = [0, 1, 2].map((index) => loadShare(closed, index, 3));
    expect(shares).toEqual([
      { kind: 'closed', concurrency: 4 },
      { kind: 'closed', concurrency: 3 },
      { kind: 'closed', concurrency: 3 },
    ]);
    const open = loadProfileSchema.parse({ kind: 'open', rate: 9, burstiness: 0.5, maxConcurrency: 5 });
    expect([0, 1].map((index) => loadShare(open, index, 2))).toEqual([
      { kind: 'open', rate: 4.5, burstiness: 0.5, maxConcurrency: 3 },
      { kind: 'open', rate: 4.5, burstiness: 0.5, maxConcurrency: 2 },
    ]);
    expect(() => loadShare(closed, 0, 11)).toThrow(/REPLAY_TOO_MANY_PARTS/);
  });
});
