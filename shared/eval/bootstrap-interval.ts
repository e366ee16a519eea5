import { Rng } from '../random/rng';

/** A mean with its bootstrap 95% percentile interval (same units as the values). */
export interface Interval {
  score: number;
  low: number;
  high: number;
  items: number;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** Percentile with linear interpolation between closest ranks (numpy's default), of sorted values. */
export function percentileOfSorted(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  const position = (sorted.length - 1) * fraction;
  const below = Math.floor(position);
  const above = Math.min(sorted.length - 1, below + 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/**
 * Percentile bootstrap of a statistic over units resampled with replacement: `statistic` gets
 * the resampled unit indices. Deterministic under `seed` (a string naming what is resampled, so
 * two cells never share draws by accident).
 */
export function bootstrapStatistic(
  units: number,
  statistic: (indices: readonly number[]) => number,
  samples: number,
  seed: string,
): { low: number; high: number } {
  if (units === 0) return { low: 0, high: 0 };
  const rng = new Rng(`bootstrap/${seed}`);
  const draws: number[] = [];
  const indices = new Array<number>(units);
  for (let sample = 0; sample < samples; sample++) {
    for (let index = 0; index < units; index++) indices[index] = Math.floor(rng.next() * units);
    draws.push(statistic(indices));
  }
  draws.sort((left, right) => left - right);
  return { low: percentileOfSorted(draws, 0.025), high: percentileOfSorted(draws, 0.975) };
}

/** Mean of item scores with a bootstrap 95% interval. */
export function bootstrapMean(values: readonly number[], samples: number, seed: string): Interval {
  const { low, high } = bootstrapStatistic(
    values.length,
    (indices) => {
      let sum = 0;
      for (const index of indices) sum += values[index];
      return sum / indices.length;
    },
    samples,
    seed,
  );
  return { score: mean(values), low, high, items: values.length };
}

/**
 * Paired comparison of two models on the same items: mean of `a − b` per item, with a paired
 * bootstrap 95% interval (items resampled, both models' scores of an item kept together).
 */
export function pairedDifference(a: readonly number[], b: readonly number[], samples: number, seed: string): Interval {
  if (a.length !== b.length) throw new Error(`paired comparison needs equal lengths (${a.length} vs ${b.length})`);
  return bootstrapMean(
    a.map((value, index) => value - b[index]),
    samples,
    seed,
  );
}
