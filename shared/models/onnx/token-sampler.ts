import type { Rng } from '../../random/rng';

/**
 * Next-token choice over one row of a vocabulary.
 *
 * Log-probabilities are reported at the *logprob temperature* (the sampling temperature, or 1
 * for greedy decoding, where the tempered limit is degenerate), over the whole vocabulary before
 * top-k/top-p truncation, so a sampled token's logprob equals what scoring the same token at the
 * same temperature gives.
 */

export interface SamplingParameters {
  /** 0 = greedy (argmax, lowest id on ties). */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables. */
  topP: number;
  /** Keep the k most likely tokens; 0 or less disables. */
  topK: number;
}

/** The temperature logprobs are computed at for a sampling temperature. */
export function logprobTemperatureOf(samplingTemperature: number): number {
  return samplingTemperature > 0 ? samplingTemperature : 1;
}

/** Index of the largest value, lowest index on ties. */
export function argmaxOf(values: Float32Array): number {
  let best = 0;
  for (let index = 1; index < values.length; index++) if (values[index] > values[best]) best = index;
  return best;
}

/**
 * The k largest entries' indices, largest first (lower index first on ties), in O(n log k)
 * with a bounded min-heap: a full sort of a 150k vocabulary per token would dominate decoding.
 */
export function topTokenIds(values: Float32Array, k: number): number[] {
  const size = Math.min(k, values.length);
  if (size <= 0) return [];
  const heap: number[] = [];
  // "a below b" = a ranks lower: smaller value, or equal value and larger index.
  const below = (a: number, b: number): boolean => values[a] < values[b] || (values[a] === values[b] && a > b);
  const swap = (i: number, j: number): void => {
    [heap[i], heap[j]] = [heap[j], heap[i]];
  };
  for (let index = 0; index < values.length; index++) {
    if (heap.length < size) {
      heap.push(index);
      for (
        let child = heap.length - 1;
        child > 0 && below(heap[child], heap[(child - 1) >> 1]);
        child = (child - 1) >> 1
      )
        swap(child, (child - 1) >> 1);
    } else if (below(heap[0], index)) {
      heap[0] = index;
      for (let parent = 0; ;) {
        const left = 2 * parent + 1;
        let lowest = parent;
        if (left < heap.length && below(heap[left], heap[lowest])) lowest = left;
        if (left + 1 < heap.length && below(heap[left + 1], heap[lowest])) lowest = left + 1;
        if (lowest === parent) break;
        swap(parent, lowest);
        parent = lowest;
      }
    }
  }
  return heap.sort((a, b) => (below(a, b) ? 1 : below(b, a) ? -1 : 0));
}

/**
 * Draws a token from `probabilities` (the row's softmax at the sampling temperature, > 0) after
 * top-k, then top-p on the renormalized remainder, as Hugging Face's warpers order them.
 */
export function sampleToken(probabilities: Float32Array, parameters: SamplingParameters, rng: Rng): number {
  const topK = parameters.topK > 0 && parameters.topK < probabilities.length ? parameters.topK : 0;
  let candidates: number[] | undefined;
  if (topK > 0) {
    candidates = topTokenIds(probabilities, topK);
    if (parameters.topP < 1) candidates = sortedNucleus(candidates, probabilities, parameters.topP);
  } else if (parameters.topP < 1 && probabilities.length <= smallRow) {
    const sorted = Array.from(probabilities.keys()).sort((a, b) => probabilities[b] - probabilities[a] || a - b);
    candidates = sortedNucleus(sorted, probabilities, parameters.topP);
  } else if (parameters.topP < 1) {
    const { boundary, boundaryIds, mass } = rowNucleus(probabilities, parameters.topP);
    const bits = new Uint32Array(probabilities.buffer, probabilities.byteOffset, probabilities.length);
    return drawFrom(probabilities, rng.next() * mass, (visit) => {
      for (let tokenId = 0; tokenId < probabilities.length; tokenId++)
        if (bits[tokenId] >>> 16 > boundary && visit(tokenId)) return;
      for (const tokenId of boundaryIds) if (visit(tokenId)) return;
    });
  }
  if (!candidates) {
    let total = 0;
    for (let tokenId = 0; tokenId < probabilities.length; tokenId++) total += probabilities[tokenId];
    return drawFrom(probabilities, rng.next() * total, (visit) => {
      for (let tokenId = 0; tokenId < probabilities.length; tokenId++) if (visit(tokenId)) return;
    });
  }
  const chosen = candidates;
  const total = chosen.reduce((sum, tokenId) => sum + probabilities[tokenId], 0);
  return drawFrom(probabilities, rng.next() * total, (visit) => {
    for (const tokenId of chosen) if (visit(tokenId)) return;
  });
}

/** Walks tokens subtracting their probability from `roll`; the one that takes it below zero wins. */
function drawFrom(
  probabilities: Float32Array,
  roll: number,
  walk: (visit: (tokenId: number) => boolean) => void,
): number {
  let remaining = roll;
  let chosen = -1;
  let lastPositive = -1;
  walk((tokenId) => {
    const probability = probabilities[tokenId];
    if (probability > 0) lastPositive = tokenId;
    remaining -= probability;
    if (remaining < 0) {
      chosen = tokenId;
      return true;
    }
    return false;
  });
  // Rounding can leave a sliver of the roll: it belongs to the last token with any mass.
  return chosen >= 0 ? chosen : lastPositive >= 0 ? lastPositive : argmaxOf(probabilities);
}

/** The shortest prefix of `sortedIds` (most likely first) whose mass reaches topP of theirs. */
function sortedNucleus(sortedIds: number[], probabilities: Float32Array, topP: number): number[] {
  const target = topP * sortedIds.reduce((sum, tokenId) => sum + probabilities[tokenId], 0);
  let mass = 0;
  for (let index = 0; index < sortedIds.length; index++) {
    mass += probabilities[sortedIds[index]];
    if (mass >= target) return sortedIds.slice(0, index + 1);
  }
  return sortedIds;
}

const bucketCount = 1 << 16;
/** Reused between calls (the function is synchronous): a fresh 512 KiB histogram per token adds up. */
let massByBucket: Float64Array | undefined;
/** Rows up to this length are simply sorted. */
const smallRow = 4096;

/**
 * The nucleus of a whole row without sorting it: a non-negative float's top 16 bits (exponent
 * and 7 mantissa bits) order it, so a histogram of mass by those bits finds the one bucket where
 * the sorted prefix reaches topP; only that bucket is sorted. Same set as a full sort: every
 * token whose bucket is above `boundary`, plus `boundaryIds`; `mass` is theirs.
 */
function rowNucleus(
  probabilities: Float32Array,
  topP: number,
): { boundary: number; boundaryIds: number[]; mass: number } {
  const bits = new Uint32Array(probabilities.buffer, probabilities.byteOffset, probabilities.length);
  massByBucket ??= new Float64Array(bucketCount);
  massByBucket.fill(0);
  for (let tokenId = 0; tokenId < probabilities.length; tokenId++)
    massByBucket[bits[tokenId] >>> 16] += probabilities[tokenId];
  // Summed in the order of the walk below, so the walk is sure to reach the target.
  let total = 0;
  for (let bucket = bucketCount - 1; bucket >= 0; bucket--) total += massByBucket[bucket];
  const target = topP * total;
  let boundary = 0;
  let mass = 0;
  for (let bucket = bucketCount - 1; bucket >= 0; bucket--) {
    const bucketMass = massByBucket[bucket];
    if (mass + bucketMass >= target) {
      boundary = bucket;
      break;
    }
    mass += bucketMass;
  }
  const candidates: number[] = [];
  for (let tokenId = 0; tokenId < probabilities.length; tokenId++)
    if (bits[tokenId] >>> 16 === boundary) candidates.push(tokenId);
  candidates.sort((a, b) => probabilities[b] - probabilities[a] || a - b);
  const boundaryIds: number[] = [];
  for (const tokenId of candidates) {
    if (mass >= target) break;
    boundaryIds.push(tokenId);
    mass += probabilities[tokenId];
  }
  return { boundary, boundaryIds, mass };
}
