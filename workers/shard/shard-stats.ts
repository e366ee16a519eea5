import type { ExportFormat, ShardSplit } from './shard-contract';

/** One bucket of a length histogram: samples with `from <= tokens < to`. */
export interface LengthBucket {
  from: number;
  to: number;
  samples: number;
}

/**
 * Sample lengths in power-of-two buckets (0-255, 256-511, ... up to the sequence length), the
 * shape of the distribution that decides how well samples pack.
 */
export function lengthHistogram(lengths: Iterable<number>, sequenceLength: number): LengthBucket[] {
  const edges = [0, 256];
  while (edges.at(-1)! < sequenceLength) edges.push(Math.min(edges.at(-1)! * 2, sequenceLength));
  edges[edges.length - 1] = sequenceLength + 1;
  const buckets = edges.slice(0, -1).map((from, index) => ({ from, to: edges[index + 1], samples: 0 }));
  for (const length of lengths) {
    const bucket = buckets.find((candidate) => length >= candidate.from && length < candidate.to);
    if (bucket) bucket.samples++;
  }
  return buckets;
}

/** Figures of one split. */
export interface SplitStats {
  /** Unique samples (before weights). */
  uniqueSamples: number;
  /** Samples packed, weight copies included. */
  samples: number;
  tasks: number;
  sequences: number;
  /** Non-padding tokens. */
  tokens: number;
  trainedTokens: number;
  paddingTokens: number;
  /** tokens / (sequences × sequenceLength). */
  fill: number;
  /** The best fill any whole-sample packing could reach on these lengths (pack-sequences.ts). */
  fillUpperBound: number;
  lengths: LengthBucket[];
  shards: number;
}

export interface InputSetStats {
  name: string;
  weight: number;
  uris: string[];
  records: number;
  accepted: number;
  duplicates: number;
  rejected: number;
  /** Train samples after weights. */
  trainSamples: number;
}

/** stats.json and the manifest's stats: every figure the dataset card shows. */
export interface ShardStats {
  schemaVersion: number;
  tokenizer: { name: string; fingerprint: string; templateHash: string; padTokenId: number; padToken: string };
  settings: {
    sequenceLength: number;
    packing: boolean;
    trainOn: 'all' | 'last';
    enableThinking?: boolean;
    overLength: 'drop' | 'truncate';
    validationFraction: number;
    seed: string;
    renderDate: string;
    heldOut: { variantHashes: string[]; families: string[]; split: string };
  };
  records: number;
  /** Unique samples accepted (all splits, before weights). */
  samples: number;
  duplicates: number;
  rejected: Record<string, number>;
  /** A few rejections per code, for people to look at. */
  rejectionExamples: Array<{ code: string; id: string; reason: string }>;
  overLength: { dropped: number; truncated: number };
  /**
   * How the template was met: the hook-message form, samples whose hook system messages were
   * folded into turns, samples whose span starts at a merged first token (thinking templates),
   * and what the template does that a user should know.
   */
  template: {
    hookMessages: string;
    systemMessages: string;
    samplesWithFoldedHooks: number;
    samplesWithMergedStart: number;
    warnings: string[];
  };
  inputs: InputSetStats[];
  splits: Partial<Record<ShardSplit, SplitStats>>;
  exports: Record<
    ExportFormat,
    { records: number; skipped: number; foldedSystemMessages: number; droppedCallText: number }
  >;
  /** Hash of the part outputs the fan-in read: a rerun with the same parts reuses the output. */
  partsHash: string;
}
