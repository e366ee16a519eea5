import { z } from 'zod';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';
import { summarizeShard } from './shard-summary';

/**
 * Config of the `shard` stage: SFT data from one or more trajectory sets, rendered by the target
 * model's own chat template, tokenized by its own tokenizer, loss-masked, deduplicated, split by
 * task, packed into fixed-length sequences and written as Parquet shards, plus the
 * conversations in the JSONL formats other trainers ingest.
 *
 * ```yaml
 * stages:
 *   shard:
 *     inputs:
 *       - { uri: "${stages.collect.manifestUri}", weight: 1, name: teacher }
 *       - { uri: "${stages.augment.manifestUri}", weight: 0.5, name: hsa }
 *     tokenizer: { preset: qwen3 }
 *     sequenceLength: 8192
 *     heldOut: { families: [hooks] }
 * ```
 */

const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)).min(1),
]);

export const shardInputSetSchema = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => ({ uri: [uri], weight: 1 })),
  z
    .object({
      /** Trajectories: gzip JSONL objects, or stage manifests (every JSONL object they list). */
      uri: uriList,
      /**
       * Expected copies of each of the set's samples in the train split: 2 repeats every sample,
       * 0.5 keeps a seeded half, 0 leaves the set out of train. Validation and held-out splits
       * take every sample once whatever the weight. Default 1.
       */
      weight: z.number().min(0).max(1000).default(1),
      /** Name in the manifest and dataset card. Default `set-<n>` (1-based). */
      name: z.string().min(1).max(100).optional(),
    })
    .strict(),
]);
export type ShardInputSet = z.infer<typeof shardInputSetSchema>;

/** The target model's tokenizer: the one tokenizer-source schema every stage uses. */
export const shardTokenizerSchema = tokenizerSourceSchema;
export type ShardTokenizer = z.infer<typeof shardTokenizerSchema>;

export const exportFormats = ['openai', 'ms-swift', 'llama-factory'] as const;
export type ExportFormat = (typeof exportFormats)[number];

export const shardSplits = ['train', 'validation', 'heldout'] as const;
export type ShardSplit = (typeof shardSplits)[number];

export const shardInputSchema = z
  .object({
    /** Trajectory sets to mix (`hat stage --in` sets plain URIs, weight 1). */
    inputs: z.array(shardInputSetSchema).min(1),
    /** Target model's tokenizer and chat template. Default: preset qwen3 with its own template. */
    tokenizer: shardTokenizerSchema.default({}),
    /** Passed to the template as `enable_thinking` when set (Qwen3 family); unset leaves it out, as serving does. */
    enableThinking: z.boolean().optional(),
    /** Train every assistant turn, or only the last one. Default all. */
    trainOn: z.enum(['all', 'last']).default('all'),
    /** Tokens per packed sequence (and the longest sample kept). Default 8192. */
    sequenceLength: z.number().int().min(16).max(1_048_576).default(8192),
    /** Pack several samples per sequence (best-fit decreasing); off: one sample per sequence. Default true. */
    packing: z.boolean().default(true),
    /**
     * A sample longer than sequenceLength: `drop` it, or `truncate` it after the last assistant
     * turn that fits (re-rendered and re-tokenized; it still ends with an assistant turn). Default truncate.
     */
    overLength: z.enum(['drop', 'truncate']).default('truncate'),
    /** Share of tasks (not samples) that go to validation, by a seeded hash of the task id. Default 0.05. */
    validationFraction: z.number().min(0).max(0.9).default(0.05),
    /**
     * Harness variants kept out of training (Harness-Variant QA style evaluation): trajectories
     * whose `harness.variantHash` is listed, or that used a listed HSA family, go to `split`; the
     * other trajectories of their tasks go to validation, so no task is on both sides.
     */
    heldOut: z
      .object({
        variantHashes: z.array(z.string().min(1)).default([]),
        families: z.array(z.string().min(1)).default([]),
        /** Where held-out trajectories go. Default `heldout` (a split of its own). */
        split: z.enum(['heldout', 'validation']).default('heldout'),
      })
      .strict()
      .default({ variantHashes: [], families: [], split: 'heldout' }),
    /** Seed of the split, the weights and the sequence order. Default: the run's seed. */
    seed: z.string().min(1).optional(),
    /** Input records per part job. Default 1000. */
    recordsPerPart: z.number().int().min(1).max(1_000_000).default(1000),
    /** Packed sequences per Parquet shard. Default 1024. */
    sequencesPerShard: z.number().int().min(1).max(1_000_000).default(1024),
    /** JSONL formats written per split. Default all three. */
    formats: z.array(z.enum(exportFormats)).default([...exportFormats]),
    /** Also write verl-style multi-turn SFT Parquet (messages and tools as JSON text). Default true. */
    verlParquet: z.boolean().default(true),
    /** The moment templates' `strftime_now` sees (ISO-8601); fixed so reruns give the same bytes. */
    renderDate: z.iso.datetime({ offset: true }).default('2025-01-01T00:00:00Z'),
    /**
     * Check 1 in N samples' token ids against the tokenizer's own whole-text encoding (the stage
     * encodes by remembered segments; see shared/text/segmented-encoder.ts). 0 never. Default 64.
     */
    verifyEncodingEvery: z.number().int().min(0).max(1_000_000).default(64),
    /**
     * Share of unique records the stage may refuse before it warns (CLI and amber in the run
     * report, with the top reasons). A shard that keeps no sample fails whatever this is. Default 0.05.
     */
    warnRefusedShare: z.number().min(0).max(1).default(0.05),
  })
  .strict();
export type ShardInput = z.infer<typeof shardInputSchema>;

const writtenObjectSchema = z.object({
  key: z.string(),
  uri: z.string(),
  sha256: z.string(),
  bytes: z.number().int().nonnegative(),
});

/** Everything a part needs to tokenize the same way as every other part. */
export const shardTextSettingsSchema = z.object({
  tokenizer: z.object({ preset: z.string().optional(), modelDir: z.string().optional() }),
  /** The template override and the sha256 of its text as `plan` read it. */
  chatTemplate: z.object({ uri: z.string(), sha256: z.string() }).optional(),
  hookMessages: z.enum(['auto', 'system-messages', 'folded']).optional(),
  enableThinking: z.boolean().optional(),
  trainOn: z.enum(['all', 'last']),
  sequenceLength: z.number().int().positive(),
  overLength: z.enum(['drop', 'truncate']),
  renderDate: z.string(),
  verifyEncodingEvery: z.number().int().nonnegative(),
});
export type ShardTextSettings = z.infer<typeof shardTextSettingsSchema>;

export const shardPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  /** Index of the input set (its weight and name are applied at fan-in). */
  inputIndex: z.number().int().nonnegative(),
  /** One input object and the record range of it this part handles (end exclusive; absent: to the end). */
  source: z.object({
    uri: z.string(),
    start: z.number().int().nonnegative(),
    end: z.number().int().positive().optional(),
    /** The sha256 the manifest that listed the object records (its records were checked when written; see readRecordRange). */
    sha256: z.string().optional(),
  }),
  text: shardTextSettingsSchema,
  /** Formats whose bodies the part writes for the fan-in: the export formats, and openai when verl Parquet is on. */
  exportBodies: z.array(z.enum(exportFormats)),
});
export type ShardPartInput = z.infer<typeof shardPartInputSchema>;

export const shardPartOutputSchema = z.object({
  index: z.number().int().nonnegative(),
  inputIndex: z.number().int().nonnegative(),
  /** Per-record index (JSONL): status, key, task, split facts, token offsets, spans. */
  entries: writtenObjectSchema.extend({ records: z.number().int().nonnegative() }),
  /** The part's distinct tool lists (JSONL, one JSON text per line), which the export bodies name by index. */
  toolLists: writtenObjectSchema.extend({ records: z.number().int().nonnegative() }),
  /** Per format in the part input's `exportBodies`: the accepted conversations' bodies (JSONL), line-aligned with the `ok` entries. */
  exportBodies: z.array(
    writtenObjectSchema.extend({ format: z.enum(exportFormats), records: z.number().int().nonnegative() }),
  ),
  /** Token ids of the accepted records, little-endian int32, concatenated. */
  tokens: writtenObjectSchema.extend({ tokens: z.number().int().nonnegative() }),
  /** The input object read, with its sha256 (lineage). */
  input: z.object({ uri: z.string(), sha256: z.string() }),
  records: z.number().int().nonnegative(),
  accepted: z.number().int().nonnegative(),
  tokenizerFingerprint: z.string(),
  templateHash: z.string(),
});
export type ShardPartOutput = z.infer<typeof shardPartOutputSchema>;

const splitFiguresSchema = z.object({
  samples: z.number().int().nonnegative(),
  sequences: z.number().int().nonnegative(),
  tokens: z.number().int().nonnegative(),
  trainedTokens: z.number().int().nonnegative(),
  /** Non-padding tokens / all tokens of the packed sequences. */
  fill: z.number().min(0).max(1),
});

export const shardOutputSchema = z.object({
  manifestUri: z.string(),
  /** The dataset card (Markdown). */
  cardUri: z.string(),
  records: z.number().int().nonnegative(),
  /** Unique samples emitted (before weights). */
  samples: z.number().int().nonnegative(),
  duplicates: z.number().int().nonnegative(),
  rejected: z.record(z.string(), z.number().int().nonnegative()),
  /** Refused records / unique records. */
  refusedShare: z.number().min(0).max(1).default(0),
  /** The share above which the stage warns (input `warnRefusedShare`). */
  warnRefusedShare: z.number().min(0).max(1).default(0.05),
  /** What a user should know about the template: it drops tool definitions, never renders calls, or moves system messages. */
  templateWarnings: z.array(z.string()).default([]),
  overLength: z.object({ dropped: z.number().int().nonnegative(), truncated: z.number().int().nonnegative() }),
  splits: z.record(z.string(), splitFiguresSchema),
});
export type ShardOutput = z.infer<typeof shardOutputSchema>;

export const shardContract: FanOutContract<ShardInput, ShardOutput, ShardPartInput, ShardPartOutput> = {
  name: 'shard',
  description:
    'SFT shards: trajectories rendered by the target chat template, tokenized, loss-masked, deduplicated, split by task, packed into Parquet',
  input: shardInputSchema,
  output: shardOutputSchema,
  summarize: summarizeShard,
  partCounters: (part) => ({ records: part.records, samples: part.accepted, tokens: part.tokens.tokens }),
  partInput: shardPartInputSchema,
  partOutput: shardPartOutputSchema,
  // Rendering and tokenizing is pure CPU: run it where a busy event loop cannot starve lock renewal.
  queue: { cpuHeavy: true, attempts: 3 },
};
