import { percentileKey, percentileOfSorted, sortedSamples } from './percentile';

/** What a report says about one metric: counts, moments and the asked percentiles. */
export interface MetricSummary {
  count: number;
  mean: number | null;
  /** Sample standard deviation (n - 1); null under two samples. */
  std: number | null;
  min: number | null;
  max: number | null;
  /** `p50`, `p90`, ... as asked; null when there are no samples. */
  percentiles: Record<string, number | null>;
}

/** Default percentiles of every report: P50/P90/P95/P99. */
export const defaultPercentiles: readonly number[] = [50, 90, 95, 99];

export function summarizeSamples(
  values: ArrayLike<number>,
  percentiles: readonly number[] = defaultPercentiles,
): MetricSummary {
  const sorted = sortedSamples(values);
  const count = sorted.length;
  const finite = (value: number): number | null => (Number.isFinite(value) ? value : null);
  let sum = 0;
  for (let index = 0; index < count; index++) sum += sorted[index];
  const mean = count > 0 ? sum / count : Number.NaN;
  let squares = 0;
  for (let index = 0; index < count; index++) squares += (sorted[index] - mean) ** 2;
  return {
    count,
    mean: finite(mean),
    std: count > 1 ? Math.sqrt(squares / (count - 1)) : null,
    min: count > 0 ? sorted[0] : null,
    max: count > 0 ? sorted[count - 1] : null,
    percentiles: Object.fromEntries(percentiles.map((p) => [percentileKey(p), finite(percentileOfSorted(sorted, p))])),
  };
}
