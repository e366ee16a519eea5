import type { Rng } from '../random/rng';
import { interpolate, percentileOfSorted, sortedSamples } from './percentile';

/** A confidence interval of `percentile(b) - percentile(a)`. */
export interface PercentileDifference {
  percentile: number;
  a: number;
  b: number;
  /** b - a on the full samples. */
  difference: number;
  /** (b - a) / a; null when a is 0. */
  relativeDifference: number | null;
  /** Lower and upper bound of the confidence interval of the difference. */
  low: number;
  high: number;
  confidence: number;
  /** How the interval was found: resampling, or order statistics for sample sets too large to resample. */
  method: 'bootstrap' | 'order-statistics';
  /** Resamples drawn (0 with order statistics). */
  resamples: number;
  /** True when the interval excludes 0: the difference exceeds run-to-run noise at this confidence. */
  significant: boolean;
}

export interface BootstrapOptions {
  rng: Rng;
  /** Resamples. Default 1000. */
  resamples?: number;
  /** Two-sided confidence. Default 0.95. */
  confidence?: number;
  /**
   * Upper bound of (samples of a + samples of b) x resamples, the random draws one interval may
   * take. Default 1e7 (well under a second). Above it the interval comes from order statistics
   * instead, which samples that large make accurate.
   */
  workLimit?: number;
}

/**
 * Percentile bootstrap of a percentile difference between two independent runs: each resample
 * draws |a| samples from a and |b| from b with replacement and takes the difference of their
 * percentiles; the interval is the central `confidence` share of those differences. Sample sets
 * too large to resample within `workLimit` (pooled ITL of long runs) get the order-statistic
 * interval instead.
 *
 * Each resample is O(n): a resample of sorted samples is described by how often each position
 * was drawn, and its order statistics are found by walking those counts, so no resample is sorted.
 */
export function bootstrapPercentileDifference(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  percentile: number,
  options: BootstrapOptions,
): PercentileDifference {
  const sortedA = sortedSamples(a);
  const sortedB = sortedSamples(b);
  const confidence = options.confidence ?? 0.95;
  const valueA = percentileOfSorted(sortedA, percentile);
  const valueB = percentileOfSorted(sortedB, percentile);
  const difference = valueB - valueA;
  const base = {
    percentile,
    a: valueA,
    b: valueB,
    difference,
    relativeDifference: valueA !== 0 && Number.isFinite(difference) ? difference / valueA : null,
    confidence,
  };
  if (sortedA.length === 0 || sortedB.length === 0) {
    return { ...base, low: Number.NaN, high: Number.NaN, method: 'bootstrap', resamples: 0, significant: false };
  }
  const resamples = options.resamples ?? 1000;
  if ((sortedA.length + sortedB.length) * resamples > (options.workLimit ?? 1e7)) {
    const { low, high } = orderStatisticInterval(sortedA, sortedB, percentile, confidence);
    return { ...base, low, high, method: 'order-statistics', resamples: 0, significant: low > 0 || high < 0 };
  }
  const countsA = new Uint32Array(sortedA.length);
  const countsB = new Uint32Array(sortedB.length);
  const differences = new Float64Array(resamples);
  for (let round = 0; round < resamples; round++) {
    differences[round] =
      resampledPercentile(sortedB, countsB, percentile, options.rng) -
      resampledPercentile(sortedA, countsA, percentile, options.rng);
  }
  differences.sort();
  const tail = ((1 - confidence) / 2) * 100;
  const low = percentileOfSorted(differences, tail);
  const high = percentileOfSorted(differences, 100 - tail);
  return { ...base, low, high, method: 'bootstrap', resamples, significant: low > 0 || high < 0 };
}

/** The percentile of one with-replacement resample of `sorted`, through draw counts per position. */
function resampledPercentile(sorted: Float64Array, counts: Uint32Array, percentile: number, rng: Rng): number {
  const count = sorted.length;
  counts.fill(0);
  // One 32-bit draw per index (not Rng.next's two): the resample loop is nothing but draws.
  for (let draw = 0; draw < count; draw++) counts[Math.floor((rng.nextUint32() / 4294967296) * count)] += 1;
  const index = (percentile / 100) * (count - 1);
  const lowerRank = Math.floor(index);
  const upperRank = Math.min(lowerRank + 1, count - 1);
  // The sorted resample is each position's value repeated by its count: find ranks lowerRank and upperRank.
  let seen = 0;
  let lower = Number.NaN;
  for (let position = 0; position < count; position++) {
    seen += counts[position];
    if (Number.isNaN(lower) && seen > lowerRank) lower = sorted[position];
    if (seen > upperRank) return interpolate(lower, sorted[position], index - lowerRank);
  }
  return sorted[count - 1];
}

/**
 * Distribution-free interval of a percentile difference for large samples: each percentile's
 * standard error comes from the order statistics around its rank (the rank of the q-quantile of
 * n samples has standard deviation sqrt(n q (1 - q))), and the difference of two independent
 * estimates has the sum of their variances.
 */
function orderStatisticInterval(
  sortedA: Float64Array,
  sortedB: Float64Array,
  percentile: number,
  confidence: number,
): { low: number; high: number } {
  const z = normalQuantile(1 - (1 - confidence) / 2);
  const standardError = (sorted: Float64Array): number => {
    const count = sorted.length;
    const q = percentile / 100;
    const spread = z * Math.sqrt(count * q * (1 - q));
    const rank = q * (count - 1);
    const lower = sorted[Math.max(0, Math.floor(rank - spread))];
    const upper = sorted[Math.min(count - 1, Math.ceil(rank + spread))];
    return (upper - lower) / (2 * z);
  };
  const halfWidth = z * Math.hypot(standardError(sortedA), standardError(sortedB));
  const difference = percentileOfSorted(sortedB, percentile) - percentileOfSorted(sortedA, percentile);
  return { low: difference - halfWidth, high: difference + halfWidth };
}

/** Inverse of the standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9). */
export function normalQuantile(probability: number): number {
  const a = [
    -3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1,
    2.506628277459239,
  ];
  const b = [
    -5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1, 1,
  ];
  const c = [
    -7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416, 1];
  const polynomial = (coefficients: number[], x: number) =>
    coefficients.reduce((sum, coefficient) => sum * x + coefficient, 0);
  const tail = 0.02425;
  if (probability < tail) {
    const q = Math.sqrt(-2 * Math.log(probability));
    return polynomial(c, q) / polynomial(d, q);
  }
  if (probability > 1 - tail) {
    const q = Math.sqrt(-2 * Math.log(1 - probability));
    return -polynomial(c, q) / polynomial(d, q);
  }
  const q = probability - 0.5;
  const r = q * q;
  return (polynomial(a, r) * q) / polynomial(b, r);
}
