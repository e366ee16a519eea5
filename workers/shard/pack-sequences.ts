/**
 * Packing samples into fixed-length sequences. Written here rather than taken from a library:
 * npm has generic bin-packing packages but none that is deterministic under ties and fast for
 * hundreds of thousands of items with integer sizes, which best-fit decreasing over a segment
 * tree of remaining capacities gives in O(n log capacity).
 */

/** Bins (sequences) of item indices, each bin's items in the order they were placed. */
export type Bins = number[][];

/** Finds the smallest remaining capacity >= a size among the open bins, in O(log capacity). */
class CapacityIndex {
  private readonly size: number;
  private readonly counts: Int32Array;
  /** Open bins by remaining capacity; the lowest bin id is used first (deterministic). */
  private readonly bins = new Map<number, number[]>();

  constructor(capacity: number) {
    let size = 1;
    while (size < capacity + 1) size *= 2;
    this.size = size;
    this.counts = new Int32Array(2 * size);
  }

  add(remaining: number, bin: number): void {
    const list = this.bins.get(remaining);
    if (list) list.push(bin);
    else this.bins.set(remaining, [bin]);
    this.update(remaining, 1);
  }

  /** Removes and returns the bin with the smallest remaining capacity >= need, or undefined. */
  take(need: number): { bin: number; remaining: number } | undefined {
    const remaining = this.firstAtLeast(need);
    if (remaining === undefined) return undefined;
    const list = this.bins.get(remaining)!;
    // Lists hold bins in creation order; the oldest one is taken.
    const bin = list.shift()!;
    if (list.length === 0) this.bins.delete(remaining);
    this.update(remaining, -1);
    return { bin, remaining };
  }

  private update(position: number, delta: number): void {
    for (let node = position + this.size; node >= 1; node >>= 1) this.counts[node] += delta;
  }

  private firstAtLeast(need: number): number | undefined {
    // Walk the leftmost path of nodes covering [need, size) that holds a non-empty leaf.
    const search = (node: number, low: number, high: number): number | undefined => {
      if (high < need || this.counts[node] === 0) return undefined;
      if (low === high) return low;
      const middle = (low + high) >> 1;
      return search(2 * node, low, middle) ?? search(2 * node + 1, middle + 1, high);
    };
    return search(1, 0, this.size - 1);
  }
}

/**
 * Best-fit decreasing: items by size, largest first (equal sizes by `compareTies`, then index),
 * each into the open bin it fills most tightly, or a new bin. Items larger than the capacity are
 * an error of the caller (over-length samples are dropped or truncated before packing).
 */
export function packBestFitDecreasing(
  sizes: readonly number[],
  capacity: number,
  compareTies?: (a: number, b: number) => number,
): Bins {
  const indices = sizes.map((_, index) => index);
  indices.sort((a, b) => sizes[b] - sizes[a] || (compareTies ? compareTies(a, b) : 0) || a - b);
  const index = new CapacityIndex(capacity);
  const bins: Bins = [];
  for (const item of indices) {
    const size = sizes[item];
    if (size > capacity || size <= 0) throw new RangeError(`item ${item} has size ${size}, outside 1..${capacity}`);
    const open = index.take(size);
    if (open) {
      bins[open.bin].push(item);
      if (open.remaining - size > 0) index.add(open.remaining - size, open.bin);
    } else {
      bins.push([item]);
      if (capacity - size > 0) index.add(capacity - size, bins.length - 1);
    }
  }
  return bins;
}

/**
 * The best fill any packing of whole samples can reach: total size over a lower bound on the
 * bins needed. At least ceil(total / capacity) bins; and for every k >= 2, items larger than
 * capacity/k cannot share a bin k at a time, so they need ceil(count / (k - 1)) bins (k = 2:
 * every item above half the capacity needs a bin of its own). Reported next to the achieved
 * fill, so a low fill caused by the length distribution is not mistaken for a poor packer.
 */
export function fillUpperBound(sizes: readonly number[], capacity: number): number {
  const total = sizes.reduce((sum, size) => sum + size, 0);
  if (total === 0) return 1;
  const descending = [...sizes].sort((a, b) => b - a);
  let bins = Math.ceil(total / capacity);
  let larger = 0;
  for (let k = 2; k <= descending.length + 1; k++) {
    const threshold = capacity / k;
    while (larger < descending.length && descending[larger] > threshold) larger++;
    if (larger === 0) continue;
    bins = Math.max(bins, Math.ceil(larger / (k - 1)));
    if (larger === descending.length) break;
  }
  return total / (bins * capacity);
}

/** One packed sequence, as flat token columns (the caller concatenates rows). */
export interface PackedSample {
  ids: ArrayLike<number>;
  /** Trained token ranges [start, end) within the sample. */
  spans: ReadonlyArray<readonly [number, number]>;
  sourceId: string;
}

/** 0, 1, 2, ... per length: position ids are copied from here rather than counted per token. */
const positionRuns = new Map<number, Int32Array>();

function positionRun(length: number): Int32Array {
  let run = positionRuns.get(length);
  if (!run) {
    run = new Int32Array(length);
    for (let index = 0; index < length; index++) run[index] = index;
    if (positionRuns.size < 8) positionRuns.set(length, run);
  }
  return run;
}

/** Appends one padded sequence of `samples` to flat columns; returns its summary. */
export function writeSequence(
  samples: readonly PackedSample[],
  sequenceLength: number,
  padId: number,
  columns: { inputIds: Int32Array; labels: Int32Array; lossMask: Int32Array; positionIds: Int32Array },
  offset: number,
): { cuSeqlens: number[]; sourceIds: string[]; tokens: number; trainedTokens: number } {
  const positions = positionRun(sequenceLength);
  const cuSeqlens = [0];
  let position = 0;
  let trainedTokens = 0;
  for (const sample of samples) {
    const start = offset + position;
    const length = sample.ids.length;
    // Whole-range copies and fills (the ids are a typed array from the part's token file).
    const ids = sample.ids instanceof Int32Array ? sample.ids : Int32Array.from(sample.ids);
    columns.inputIds.set(ids, start);
    columns.labels.fill(-100, start, start + length);
    columns.lossMask.fill(0, start, start + length);
    columns.positionIds.set(positions.subarray(0, length), start);
    for (const [spanStart, spanEnd] of sample.spans) {
      columns.labels.set(ids.subarray(spanStart, spanEnd), start + spanStart);
      columns.lossMask.fill(1, start + spanStart, start + spanEnd);
      trainedTokens += spanEnd - spanStart;
    }
    position += length;
    cuSeqlens.push(position);
  }
  const tokens = position;
  // Padding is one more segment (positions from 0, never trained), so cu_seqlens always ends at
  // the sequence length and varlen attention never lets padding attend to a sample.
  if (position < sequenceLength) {
    columns.inputIds.fill(padId, offset + position, offset + sequenceLength);
    columns.labels.fill(-100, offset + position, offset + sequenceLength);
    columns.lossMask.fill(0, offset + position, offset + sequenceLength);
    columns.positionIds.set(positions.subarray(0, sequenceLength - position), offset + position);
  }
  if (tokens < sequenceLength) cuSeqlens.push(sequenceLength);
  return { cuSeqlens, sourceIds: samples.map((sample) => sample.sourceId), tokens, trainedTokens };
}
