/**
 * Percentiles exactly as numpy's default (`method="linear"`) computes them, which is what
 * `vllm bench serve` reports: the value at virtual index `p/100 * (n - 1)` of the sorted samples,
 * linearly interpolated between its neighbours.
 */

/** Percentile `p` (0-100) of samples sorted ascending; NaN when there are none. */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  const count = sorted.length;
  if (count === 0) return Number.NaN;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must lie in [0, 100], got ${p}`);
  const index = (p / 100) * (count - 1);
  const lower = Math.floor(index);
  const upper = Math.min(lower + 1, count - 1);
  return interpolate(sorted[lower], sorted[upper], index - lower);
}

/**
 * numpy's `_lerp`: from the lower end below the midpoint, from the upper end above it, so an
 * interpolation at t = 1 returns the upper value exactly (numpy >= 1.22).
 */
export function interpolate(lower: number, upper: number, t: number): number {
  const difference = upper - lower;
  return t >= 0.5 ? upper - difference * (1 - t) : lower + difference * t;
}

/** A sorted copy of the samples (typed-array sort: numeric, and fast for millions of values). */
export function sortedSamples(values: ArrayLike<number>): Float64Array {
  const copy = Float64Array.from(values);
  copy.sort();
  return copy;
}

/** Several percentiles of unsorted samples, sorting once. */
export function percentilesOf(values: ArrayLike<number>, percentiles: readonly number[]): number[] {
  const sorted = sortedSamples(values);
  return percentiles.map((p) => percentileOfSorted(sorted, p));
}

/** `p50`, `p99`, `p99.9` keys of report fields. */
export function percentileKey(p: number): string {
  return `p${String(p)}`;
}

/** The median (the 50th percentile as above: the mean of the middle two for an even count); NaN when empty. */
export function median(values: ArrayLike<number>): number {
  return percentileOfSorted(sortedSamples(values), 50);
}
