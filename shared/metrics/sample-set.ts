import { z } from 'zod';
import { BadInputError } from '../errors';

/**
 * Raw samples per metric, mergeable exactly across part jobs.
 *
 * Why raw samples rather than HDR histograms (hdr-histogram-js): the reports must give numpy's
 * linearly interpolated percentiles, which a histogram can only approximate (it answers with a
 * bucket's value at a chosen number of significant digits, never an interpolation between two
 * samples), and `hat replay compare` bootstraps percentile differences, which needs the samples
 * themselves. Samples are 8 bytes each as little-endian float64 (base64 in JSON, gzip around it),
 * so even a million ITL gaps stay a few MB; merging is concatenation, so percentiles over merged
 * parts equal percentiles over the union, bit for bit.
 */
export class SampleSet {
  private readonly columns = new Map<string, { values: Float64Array; length: number }>();

  /** Adds one sample; non-finite values are programming errors and are refused. */
  add(metric: string, value: number): void {
    if (!Number.isFinite(value)) throw new RangeError(`sample of ${metric} is not a finite number: ${value}`);
    let column = this.columns.get(metric);
    if (!column) {
      column = { values: new Float64Array(64), length: 0 };
      this.columns.set(metric, column);
    }
    if (column.length === column.values.length) {
      const grown = new Float64Array(column.values.length * 2);
      grown.set(column.values);
      column.values = grown;
    }
    column.values[column.length++] = value;
  }

  addAll(metric: string, values: Iterable<number>): void {
    for (const value of values) this.add(metric, value);
  }

  /** The samples of a metric in insertion order (a view: copy before changing it). */
  get(metric: string): Float64Array {
    const column = this.columns.get(metric);
    return column ? column.values.subarray(0, column.length) : new Float64Array(0);
  }

  count(metric: string): number {
    return this.columns.get(metric)?.length ?? 0;
  }

  /** Metric names, sorted. */
  metrics(): string[] {
    return [...this.columns.keys()].sort();
  }

  /** Appends every sample of `other` (the exact merge of two parts). */
  merge(other: SampleSet): this {
    for (const metric of other.metrics()) {
      const values = other.get(metric);
      for (let index = 0; index < values.length; index++) this.add(metric, values[index]);
    }
    return this;
  }

  /** `{ metric: base64 of little-endian float64 }`, metrics sorted: the same samples give the same text. */
  toJSON(): SerializedSampleSet {
    return Object.fromEntries(this.metrics().map((metric) => [metric, encodeFloat64(this.get(metric))]));
  }

  static fromJSON(serialized: SerializedSampleSet, where = 'samples'): SampleSet {
    const set = new SampleSet();
    for (const [metric, text] of Object.entries(serialized)) {
      const values = decodeFloat64(text, `${where}.${metric}`);
      for (let index = 0; index < values.length; index++) set.add(metric, values[index]);
    }
    return set;
  }

  /** Merges many sets into a new one. */
  static union(sets: Iterable<SampleSet>): SampleSet {
    const merged = new SampleSet();
    for (const set of sets) merged.merge(set);
    return merged;
  }
}

export const serializedSampleSetSchema = z.record(
  z.string(),
  z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64 of little-endian float64 samples'),
);
export type SerializedSampleSet = z.infer<typeof serializedSampleSetSchema>;

export function encodeFloat64(values: ArrayLike<number>): string {
  const buffer = Buffer.alloc(values.length * 8);
  for (let index = 0; index < values.length; index++) buffer.writeDoubleLE(values[index], index * 8);
  return buffer.toString('base64');
}

export function decodeFloat64(text: string, where: string): Float64Array {
  const buffer = Buffer.from(text, 'base64');
  if (buffer.length % 8 !== 0) {
    throw new BadInputError(
      'BAD_SAMPLES',
      `${where}: ${buffer.length} bytes is not a whole number of float64 samples; the report or part file is damaged, rerun the replay`,
    );
  }
  const values = new Float64Array(buffer.length / 8);
  for (let index = 0; index < values.length; index++) values[index] = buffer.readDoubleLE(index * 8);
  return values;
}
