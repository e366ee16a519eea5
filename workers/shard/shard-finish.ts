import { z } from 'zod';
import type { FanInTasks, StageDeps } from '../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import type { ObjectInfo } from '../../shared/artifacts/artifact-store';
import { JsonlWriter } from '../../shared/artifacts/jsonl-writer';
import {
  manifestObjectOf,
  manifestObjectSchema,
  stageOutputComplete,
  type ManifestObject,
} from '../../shared/artifacts/manifest';
import { encodeParquetColumns, type ParquetColumn } from '../../shared/artifacts/parquet-codec';
import { HatError } from '../../shared/errors';
import type { ToolSpec } from '../../shared/trajectory/messages';
import { hashValue } from '../../shared/hash/hash';
import { Rng } from '../../shared/random/rng';
import { renderDatasetCard, type CardFiles } from './dataset-card';
import {
  exportLinePieces,
  lineageSuffix,
  llamaFactoryDatasetInfo,
  toolsSchemaHash,
  verlMessagesOf,
  type ExportNotes,
} from './export-formats';
import { copiesFor } from './mix-weights';
import { fillUpperBound, packBestFitDecreasing } from './pack-sequences';
import { PackedShardEncoder, type PackedShard, type PackedShardRequest, type PlacedSample } from './packed-shard';
import { readEntries, readExportBodies, readToolLists } from './part-files';
import { SpilledTokens } from './token-files';
import { KeySet, SampleTable, taskHashOf } from './sample-table';
import {
  exportFormats,
  shardSplits,
  type ExportFormat,
  type ShardInput,
  type ShardOutput,
  type ShardPartOutput,
  type ShardSplit,
} from './shard-contract';
import { templateWarnings } from '../../shared/text/template-features';
import { lengthHistogram, type InputSetStats, type ShardStats, type SplitStats } from './shard-stats';
import { loadShardTokenizer } from './shard-tokenizer';
import { isHeldOut, taskDraw } from './split-assignment';
import { shardInputSets, shardTextSettings } from './shard-settings';

export const SHARD_SCHEMA_VERSION = 1;
/** verl rows per Parquet file. */
const verlRowsPerFile = 8192;
/** Packed shards encoded ahead of the one being stored. */
const shardsAhead = 2;
/** Rejection examples kept per code. */
const examplesPerCode = 3;

const verlColumns: ParquetColumn[] = [
  { name: 'id', type: 'STRING' },
  { name: 'source_id', type: 'STRING' },
  { name: 'task_id', type: 'STRING' },
  { name: 'data_source', type: 'STRING' },
  { name: 'messages', type: 'STRING' },
  { name: 'tools', type: 'STRING' },
  { name: 'tools_schema_hash', type: 'STRING' },
  { name: 'enable_thinking', type: 'BOOLEAN', nullable: true },
  { name: 'folded_hook_messages', type: 'INT32' },
];

const jsonNull = Buffer.from('null');

const shardName = (prefix: string, index: number) => `${prefix}-${String(index).padStart(5, '0')}.parquet`;
const copyId = (id: string, copy: number) => (copy === 0 ? id : `${id}@${copy + 1}`);

/** What the fan-in reads from the parts' entries: the unique accepted samples and the counts. */
interface CollectedSamples {
  samples: SampleTable;
  /** Every unique key met (accepted and refused samples). */
  keys: KeySet;
  setStats: InputSetStats[];
  records: number;
  duplicates: number;
  rejected: Record<string, number>;
  rejectionExamples: ShardStats['rejectionExamples'];
  overLength: ShardStats['overLength'];
  templateFigures: { samplesWithFoldedHooks: number; samplesWithMergedStart: number };
}

type ShardTokenizer = Awaited<ReturnType<typeof loadShardTokenizer>>;

/** Where the fan-in's objects go: every written object, and the file names the dataset card lists. */
interface FanInOutput {
  objects: ManifestObject[];
  files: CardFiles;
}

/**
 * Fan-in of the shard stage: global exact deduplication (first occurrence in input order wins),
 * splits by task, mixing weights, best-fit-decreasing packing per split, the Parquet shards, the
 * JSONL exports and verl Parquet, the dataset card, stats, and the manifest last. Deterministic:
 * the same part outputs, config and seed give the same bytes; a rerun that finds its complete
 * output for the same parts and config returns it without writing.
 */
export async function finishShard(
  input: ShardInput,
  parts: ShardPartOutput[],
  deps: StageDeps,
  taskOutputs: unknown[] = [],
): Promise<ShardOutput> {
  const { configHash, partsHash } = fanInHashes(input, parts);
  const seed = input.seed ?? deps.run.seed;
  const finished = await finishedOutput(deps, configHash, partsHash);
  if (finished) return finished;

  const { tokenizer, padTokenId } = await fanInTokenizer(input, parts, deps);

  deps.progress({ message: 'deduplicating and splitting' });
  // The tasks' deduplication when this thread still holds it (read only from here on).
  const collected = await withCollectedSamples(input, parts, deps, (shared) => Promise.resolve(shared));
  const refusals = refusalCheck({
    ...collected,
    samples: collected.samples.length,
    warnShare: input.warnRefusedShare,
  });
  if (refusals.empty) throw new HatError('SHARD_NO_SAMPLES', refusals.empty, { exitCode: 1 });
  const warnings = templateWarnings(
    tokenizer,
    input.enableThinking !== undefined ? { enableThinking: input.enableThinking } : {},
  );
  for (const warning of [...warnings, ...(refusals.warning ? [refusals.warning] : [])])
    deps.logger.warn({ stage: 'shard' }, warning);

  const out: FanInOutput = { objects: [], files: { packed: {}, exports: {}, verl: {} } };
  const exportFigures = emptyExportFigures();
  // No task results: the plan found nothing to do, yet the output is not complete (removed since):
  // the tasks run here, at once.
  const results =
    taskOutputs.length > 0
      ? taskOutputs.map((value) => shardFanInTaskOutputSchema.parse(value))
      : await Promise.all(shardFanInTaskList(input).map((task) => runShardFanInTask(input, parts, task, deps)));
  const splitStats = gatherTaskOutputs(results, out, exportFigures);
  if (input.formats.includes('llama-factory')) await writeLlamaFactoryInfo(deps, out);

  const { samples, records, duplicates, rejected, rejectionExamples, overLength, templateFigures } = collected;
  const stats: ShardStats = {
    schemaVersion: SHARD_SCHEMA_VERSION,
    tokenizer: {
      name: tokenizer.name,
      fingerprint: tokenizer.fingerprint,
      templateHash: tokenizer.templateHash,
      padTokenId,
      padToken: tokenizer.decode([padTokenId]),
    },
    settings: {
      sequenceLength: input.sequenceLength,
      packing: input.packing,
      trainOn: input.trainOn,
      ...(input.enableThinking !== undefined ? { enableThinking: input.enableThinking } : {}),
      overLength: input.overLength,
      validationFraction: input.validationFraction,
      seed,
      renderDate: input.renderDate,
      heldOut: input.heldOut,
    },
    records,
    samples: samples.length,
    duplicates,
    rejected,
    rejectionExamples,
    overLength,
    template: {
      hookMessages: tokenizer.hookMessages,
      systemMessages: tokenizer.systemMessagePlacement,
      ...templateFigures,
      warnings,
    },
    inputs: collected.setStats,
    splits: splitStats,
    exports: exportFigures,
    partsHash,
  };
  const cardInfo = await writeStatsAndCard(stats, deps, out);

  const output: ShardOutput = {
    manifestUri: deps.output.uri('manifest.json'),
    cardUri: cardInfo.uri,
    records,
    samples: samples.length,
    duplicates,
    rejected,
    refusedShare: refusals.share,
    warnRefusedShare: input.warnRefusedShare,
    templateWarnings: warnings,
    overLength,
    splits: Object.fromEntries(
      Object.entries(splitStats).map(([split, figures]) => [
        split,
        {
          samples: figures.samples,
          sequences: figures.sequences,
          tokens: figures.tokens,
          trainedTokens: figures.trainedTokens,
          fill: figures.fill,
        },
      ]),
    ),
  };
  const inputs = [...new Map(parts.map((part) => [part.input.uri, part.input])).values()];
  await writeStageManifest(deps, {
    objects: out.objects,
    lineage: { inputs, configHash },
    stats: { ...stats, output },
  });
  return output;
}

/** The hashes that say whether an earlier fan-in's output is this one's. */
function fanInHashes(input: ShardInput, parts: ShardPartOutput[]): { configHash: string; partsHash: string } {
  // Contents, not locations: the same parts written under another root hash the same.
  const partsHash = hashValue(
    parts.map((part) => ({
      ...part,
      entries: part.entries.sha256,
      exportBodies: part.exportBodies.map((object) => object.sha256),
      toolLists: part.toolLists.sha256,
      tokens: part.tokens.sha256,
    })),
  );
  return { configHash: hashValue(input), partsHash };
}

/** The Parquet key-value metadata of every packed shard. */
function packedMetadata(
  input: ShardInput,
  tokenizer: ShardTokenizer,
  padTokenId: number,
  configHash: string,
): Record<string, string> {
  return {
    'hat.schema_version': String(SHARD_SCHEMA_VERSION),
    'hat.tokenizer': tokenizer.name,
    'hat.tokenizer_fingerprint': tokenizer.fingerprint,
    'hat.template_hash': tokenizer.templateHash,
    'hat.sequence_length': String(input.sequenceLength),
    'hat.pad_token_id': String(padTokenId),
    'hat.packing': input.packing ? 'best-fit-decreasing' : 'none',
    'hat.train_on': input.trainOn,
    'hat.config_hash': configHash,
  };
}

function emptyExportFigures(): ShardStats['exports'] {
  return Object.fromEntries(
    exportFormats.map((format) => [format, { records: 0, skipped: 0, foldedSystemMessages: 0, droppedCallText: 0 }]),
  ) as ShardStats['exports'];
}

/** Every part's samples deduplicated, refusals counted, splits and copies assigned. */
async function collectAndAssign(input: ShardInput, parts: ShardPartOutput[], deps: StageDeps) {
  const seed = input.seed ?? deps.run.seed;
  const sets = shardInputSets(input);
  const collected = await collectSamples(parts, sets, deps, { seed, heldOut: input.heldOut });
  assignSampleSplits(collected, sets, input, seed);
  return collected;
}

/**
 * Fan-in tasks that run in one process or thread (`hat stage`, a worker's sandbox thread taking
 * the plan, several tasks and the finish one after another) share one deduplication over the
 * parts. It outlives its last user by `keepSamplesMs`, and only one fan-in's is kept unused.
 */
const keepSamplesMs = 60_000;
const sharedSamples = new Map<
  string,
  { samples: Promise<CollectedSamples>; users: number; expiry?: ReturnType<typeof setTimeout> }
>();

async function withCollectedSamples<T>(
  input: ShardInput,
  parts: ShardPartOutput[],
  deps: StageDeps,
  use: (collected: CollectedSamples) => Promise<T>,
): Promise<T> {
  const key = `${deps.store.uriOf(deps.output.manifestKey)}\n${hashValue({ input, seed: deps.run.seed, parts })}`;
  let entry = sharedSamples.get(key);
  if (!entry) {
    for (const [other, held] of sharedSamples)
      if (held.users === 0) {
        clearTimeout(held.expiry);
        sharedSamples.delete(other);
      }
    const created: { samples: Promise<CollectedSamples>; users: number; expiry?: ReturnType<typeof setTimeout> } = {
      samples: collectAndAssign(input, parts, deps),
      users: 0,
    };
    // A failed read is not kept: the retry reads again.
    created.samples.catch(() => {
      if (sharedSamples.get(key) === created) sharedSamples.delete(key);
    });
    sharedSamples.set(key, created);
    entry = created;
  }
  const held = entry;
  clearTimeout(held.expiry);
  held.users++;
  try {
    return await use(await held.samples);
  } finally {
    if (--held.users === 0) {
      held.expiry = setTimeout(() => {
        if (held.users === 0 && sharedSamples.get(key) === held) sharedSamples.delete(key);
      }, keepSamplesMs);
      held.expiry.unref();
    }
  }
}

/**
 * A task of the shard fan-in: the packed shards of every split, one JSONL export format of every
 * split, or the verl Parquet of every split. Each reads the part files it needs and writes only its
 * own objects; the stage job then writes the stats, the card and the manifest.
 */
export const shardFanInTaskSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('packed') }),
  z.object({ kind: z.literal('export'), format: z.enum(exportFormats) }),
  z.object({ kind: z.literal('verl') }),
]);
export type ShardFanInTask = z.infer<typeof shardFanInTaskSchema>;

const splitSchema = z.enum(shardSplits);
const splitFilesSchema = z.partialRecord(splitSchema, z.array(z.string()));
const exportFiguresSchema = z.object({
  records: z.number(),
  skipped: z.number(),
  foldedSystemMessages: z.number(),
  droppedCallText: z.number(),
});

/** What a fan-in task hands the stage job: its objects in write order, its files, its figures. */
export const shardFanInTaskOutputSchema = z.object({
  kind: z.enum(['packed', 'export', 'verl']),
  objects: z.array(manifestObjectSchema),
  packed: splitFilesSchema.optional(),
  /** Per split figures of the packed task (shard-stats.ts SplitStats). */
  splits: z
    .partialRecord(
      splitSchema,
      z.custom<SplitStats>((value) => typeof value === 'object' && value !== null),
    )
    .optional(),
  exports: z.array(z.object({ split: splitSchema, format: z.enum(exportFormats), name: z.string() })).optional(),
  figures: z.partialRecord(z.enum(exportFormats), exportFiguresSchema).optional(),
  verl: splitFilesSchema.optional(),
});
export type ShardFanInTaskOutput = z.infer<typeof shardFanInTaskOutputSchema>;

/** The tasks of a fan-in that has work left (none when its output is complete). */
async function planShardFanIn(input: ShardInput, parts: ShardPartOutput[], deps: StageDeps): Promise<ShardFanInTask[]> {
  const { configHash, partsHash } = fanInHashes(input, parts);
  if (await finishedOutput(deps, configHash, partsHash)) return [];
  // Refused before any task writes: a shard that keeps no sample writes nothing.
  await fanInTokenizer(input, parts, deps);
  await withCollectedSamples(input, parts, deps, async (collected) => {
    const refusals = refusalCheck({
      ...collected,
      samples: collected.samples.length,
      warnShare: input.warnRefusedShare,
    });
    if (refusals.empty) throw new HatError('SHARD_NO_SAMPLES', refusals.empty, { exitCode: 1 });
  });
  return shardFanInTaskList(input);
}

/** Every task of a fan-in: packing first (the longest), then each export. */
function shardFanInTaskList(input: ShardInput): ShardFanInTask[] {
  return [
    { kind: 'packed' },
    ...input.formats.map((format) => ({ kind: 'export' as const, format })),
    ...(input.verlParquet ? [{ kind: 'verl' as const }] : []),
  ];
}

async function runShardFanInTask(
  input: ShardInput,
  parts: ShardPartOutput[],
  task: ShardFanInTask,
  deps: StageDeps,
): Promise<ShardFanInTaskOutput> {
  const seed = input.seed ?? deps.run.seed;
  return withCollectedSamples(input, parts, deps, async (collected) => {
    const files: CardFiles = { packed: {}, exports: {}, verl: {} };
    const objects: ManifestObject[] = [];
    if (task.kind === 'packed') {
      deps.progress({ message: 'packing' });
      const { tokenizer, padTokenId } = await fanInTokenizer(input, parts, deps);
      const { configHash } = fanInHashes(input, parts);
      const splits = await writePackedShards(
        input,
        parts,
        collected,
        { seed, padTokenId, metadata: packedMetadata(input, tokenizer, padTokenId, configHash) },
        deps,
        { objects, files },
      );
      return { kind: 'packed', objects, packed: files.packed, splits };
    }
    deps.progress({ message: task.kind === 'export' ? `writing ${task.format}` : 'writing verl Parquet' });
    const figures = emptyExportFigures();
    await writeConversationFiles(
      input,
      parts,
      collected.samples,
      shardInputSets(input).map((set) => set.name),
      deps,
      figures,
      files,
      objects,
      task.kind === 'export' ? { formats: [task.format], verl: false } : { formats: [], verl: true },
    );
    if (task.kind === 'verl') return { kind: 'verl', objects, verl: files.verl };
    const exports = Object.entries(files.exports).flatMap(([split, byFormat]) =>
      Object.entries(byFormat ?? {}).map(([format, name]) => ({
        split: split as ShardSplit,
        format: format as ExportFormat,
        name,
      })),
    );
    return { kind: 'export', objects, exports, figures: { [task.format]: figures[task.format] } };
  });
}

/**
 * The tasks' objects and files in the order one job writes them: packed shards, then the verl
 * Parquet in write order, then the JSONL exports by name; the packed task's split figures.
 */
function gatherTaskOutputs(
  outputs: ShardFanInTaskOutput[],
  out: FanInOutput,
  exportFigures: ShardStats['exports'],
): Partial<Record<ShardSplit, SplitStats>> {
  const packed = outputs.find((output) => output.kind === 'packed');
  if (!packed?.splits)
    throw new HatError('FAN_IN_TASKS_MISSING', 'the shard fan-in has no packing result; rerun the stage');
  out.objects.push(...packed.objects);
  out.files.packed = packed.packed ?? {};
  for (const output of outputs.filter((candidate) => candidate.kind === 'verl')) {
    out.objects.push(...output.objects);
    out.files.verl = output.verl ?? {};
  }
  const exports = outputs.filter((output) => output.kind === 'export');
  out.objects.push(
    ...exports.flatMap((output) => output.objects).sort((left, right) => (left.key < right.key ? -1 : 1)),
  );
  for (const entry of exports
    .flatMap((output) => output.exports ?? [])
    .sort((left, right) => (left.name < right.name ? -1 : 1)))
    ((out.files.exports[entry.split] ??= {}) as Record<string, string>)[entry.format] = entry.name;
  for (const output of exports) Object.assign(exportFigures, output.figures);
  return packed.splits;
}

/** The shard fan-in as tasks on any worker (see FanInTasks): packing and each export at once. */
export const shardFanInTasks: FanInTasks<ShardInput, ShardPartOutput, ShardFanInTask, ShardFanInTaskOutput> = {
  task: shardFanInTaskSchema,
  taskOutput: shardFanInTaskOutputSchema,
  plan: planShardFanIn,
  run: runShardFanInTask,
};

/** The output of an earlier complete fan-in over the same parts and config, if there is one. */
async function finishedOutput(
  deps: StageDeps,
  configHash: string,
  partsHash: string,
): Promise<ShardOutput | undefined> {
  const done = await stageOutputComplete(deps.store, deps.output.manifestKey);
  if (!done || done.lineage.configHash !== configHash || (done.stats as { partsHash?: string }).partsHash !== partsHash)
    return undefined;
  return (done.stats as { output?: ShardOutput }).output;
}

/** The tokenizer every part must have used, and the id packed sequences are padded with. */
async function fanInTokenizer(
  input: ShardInput,
  parts: ShardPartOutput[],
  deps: StageDeps,
): Promise<{ tokenizer: ShardTokenizer; padTokenId: number }> {
  const text = await shardTextSettings(input, deps);
  const tokenizer = await loadShardTokenizer(text, deps.openObject);
  for (const part of parts) {
    if (part.tokenizerFingerprint !== tokenizer.fingerprint || part.templateHash !== tokenizer.templateHash) {
      throw new HatError(
        'TOKENIZER_CHANGED',
        `part ${part.index} was tokenized with another tokenizer or template than the fan-in loads (fingerprint ${part.tokenizerFingerprint.slice(0, 12)}, template ${part.templateHash.slice(0, 12)}); rerun the stage from scratch`,
      );
    }
  }
  const padTokenId = tokenizer.padTokenId ?? tokenizer.eosTokenId;
  if (padTokenId === undefined)
    throw new HatError(
      'NO_PAD_TOKEN',
      `${tokenizer.name} has neither a pad_token nor an eos_token; packed sequences need one`,
    );
  return { tokenizer, padTokenId };
}

/** Reads every part's entries in input order: global exact deduplication, refusal counts, accepted samples. */
async function collectSamples(
  parts: ShardPartOutput[],
  sets: ReturnType<typeof shardInputSets>,
  deps: StageDeps,
  splitting: { seed: string; heldOut: ShardInput['heldOut'] },
): Promise<CollectedSamples> {
  const collected: CollectedSamples = {
    samples: new SampleTable(),
    keys: new KeySet(),
    setStats: sets.map((set) => ({
      name: set.name,
      weight: set.weight,
      uris: set.uris,
      records: 0,
      accepted: 0,
      duplicates: 0,
      rejected: 0,
      trainSamples: 0,
    })),
    records: 0,
    duplicates: 0,
    rejected: {},
    rejectionExamples: [],
    overLength: { dropped: 0, truncated: 0 },
    templateFigures: { samplesWithFoldedHooks: 0, samplesWithMergedStart: 0 },
  };
  for (const [partIndex, part] of parts.entries()) {
    const entries = await readEntries(deps.store, part.entries.key);
    const setFigures = collected.setStats[part.inputIndex];
    let conversation = 0;
    for (const [entryIndex, entry] of entries.entries()) {
      collected.records++;
      setFigures.records++;
      const line = entry.status === 'ok' ? conversation++ : -1;
      const key = entry.status === 'duplicate' ? undefined : collected.keys.add(entry.key);
      if (!key?.added) {
        collected.duplicates++;
        setFigures.duplicates++;
        continue;
      }
      if (entry.status === 'rejected') {
        const code = entry.code ?? 'UNKNOWN';
        collected.rejected[code] = (collected.rejected[code] ?? 0) + 1;
        setFigures.rejected++;
        if (code === 'OVER_LENGTH') collected.overLength.dropped++;
        if (collected.rejectionExamples.filter((example) => example.code === code).length < examplesPerCode)
          collected.rejectionExamples.push({ code, id: entry.id, reason: entry.reason ?? '' });
        continue;
      }
      if (entry.droppedMessages !== undefined) collected.overLength.truncated++;
      if (entry.foldedHookMessages !== undefined) collected.templateFigures.samplesWithFoldedHooks++;
      if (entry.mergedPromptChars !== undefined) collected.templateFigures.samplesWithMergedStart++;
      setFigures.accepted++;
      collected.samples.add({
        part: partIndex,
        entry: entryIndex,
        conversation: line,
        inputIndex: part.inputIndex,
        key: key.index,
        id: entry.id,
        taskHash: taskHashOf(entry.taskId),
        draw: taskDraw(splitting.seed, entry.taskId),
        heldOut: isHeldOut(entry, splitting.heldOut),
        tokenOffset: entry.tokenOffset!,
        tokenCount: entry.tokenCount!,
        spans: entry.spans ?? [],
        foldedHookMessages: entry.foldedHookMessages ?? 0,
      });
    }
  }
  return collected;
}

/**
 * Splits by task (split-assignment.ts: a held-out sample to the held-out split, the other samples
 * of its task to validation, every other task by its seeded draw), and each train sample's copies
 * from its input set's mixing weight.
 */
function assignSampleSplits(
  collected: CollectedSamples,
  sets: ReturnType<typeof shardInputSets>,
  input: ShardInput,
  seed: string,
): void {
  const { samples } = collected;
  const heldOutTasks = new Set<bigint>();
  for (let index = 0; index < samples.length; index++)
    if (samples.heldOutOf(index)) heldOutTasks.add(samples.taskHashOf(index));
  for (let index = 0; index < samples.length; index++) {
    const split: ShardSplit = samples.heldOutOf(index)
      ? input.heldOut.split
      : heldOutTasks.has(samples.taskHashOf(index)) || samples.drawOf(index) < input.validationFraction
        ? 'validation'
        : 'train';
    samples.setSplit(index, split);
    if (split === 'train') {
      const inputIndex = samples.inputIndexOf(index);
      const copies = copiesFor(sets[inputIndex].weight, seed, collected.keys.hex(samples.keyOf(index)));
      samples.setCopies(index, copies);
      collected.setStats[inputIndex].trainSamples += copies;
    }
  }
}

/** Packs each split's samples into sequences (best-fit decreasing, seeded order) and writes the packed Parquet shards. */
async function writePackedShards(
  input: ShardInput,
  parts: ShardPartOutput[],
  samples: CollectedSamples,
  settings: { seed: string; padTokenId: number; metadata: Record<string, string> },
  deps: StageDeps,
  out: FanInOutput,
): Promise<Partial<Record<ShardSplit, SplitStats>>> {
  const tokens = await SpilledTokens.spill(
    deps.store,
    parts.map((part) => ({ key: part.tokens.key, tokens: part.tokens.tokens })),
  );
  const encoder = new PackedShardEncoder(tokens.files);
  try {
    return await packSplits(input, samples, settings, deps, out, encoder);
  } finally {
    await encoder.close();
    tokens.close();
  }
}

async function packSplits(
  input: ShardInput,
  { samples, keys }: CollectedSamples,
  settings: { seed: string; padTokenId: number; metadata: Record<string, string> },
  deps: StageDeps,
  out: FanInOutput,
  encoder: PackedShardEncoder,
): Promise<Partial<Record<ShardSplit, SplitStats>>> {
  const splitStats: Partial<Record<ShardSplit, SplitStats>> = {};
  for (const split of shardSplits) {
    const members: number[] = [];
    for (let index = 0; index < samples.length; index++)
      if (samples.splitOf(index) === split && samples.copiesOf(index) > 0) members.push(index);
    if (members.length === 0) continue;
    // Items: each member once per copy, in member order.
    const itemCount = members.reduce((sum, member) => sum + samples.copiesOf(member), 0);
    const itemSample = new Uint32Array(itemCount);
    const itemCopy = new Uint32Array(itemCount);
    let item = 0;
    for (const member of members)
      for (let copy = 0; copy < samples.copiesOf(member); copy++, item++) {
        itemSample[item] = member;
        itemCopy[item] = copy;
      }
    const sizes = Array.from(itemSample, (member) => samples.tokenCountOf(member));
    // Equal sizes in the order of `${key}/${copy}` as text: the key's hex, then the copy's digits.
    const compareTies = (a: number, b: number) => {
      const byKey = keys.compare(samples.keyOf(itemSample[a]), samples.keyOf(itemSample[b]));
      if (byKey !== 0) return byKey;
      const copyA = String(itemCopy[a]);
      const copyB = String(itemCopy[b]);
      return copyA < copyB ? -1 : copyA > copyB ? 1 : 0;
    };
    const packed = input.packing
      ? packBestFitDecreasing(sizes, input.sequenceLength, compareTies)
      : sizes.map((_, index) => [index]);
    // Bins come out longest-first; a seeded shuffle keeps a reader that streams shards in order from seeing only long samples first.
    const bins = new Rng(`${settings.seed}/order/${split}`).shuffle(packed);
    const tasks = BigUint64Array.from(members, (member) => samples.taskHashOf(member)).sort();
    const figures: SplitStats = {
      uniqueSamples: members.length,
      samples: itemCount,
      tasks: tasks.filter((task, index) => index === 0 || task !== tasks[index - 1]).length,
      sequences: bins.length,
      tokens: 0,
      trainedTokens: 0,
      paddingTokens: 0,
      fill: 0,
      fillUpperBound: input.packing
        ? fillUpperBound(sizes, input.sequenceLength)
        : sizes.reduce((sum, size) => sum + size, 0) / (sizes.length * input.sequenceLength),
      lengths: lengthHistogram(
        members.map((member) => samples.tokenCountOf(member)),
        input.sequenceLength,
      ),
      shards: 0,
    };
    out.files.packed[split] = [];
    const metadata = { ...settings.metadata, 'hat.split': split };
    const shardCount = Math.ceil(bins.length / input.sequencesPerShard);
    // Each shard's request is built when it is submitted, so few sit on the heap at a time.
    const requestFor = (shardIndex: number): PackedShardRequest => {
      const start = shardIndex * input.sequencesPerShard;
      const sequences = bins.slice(start, start + input.sequencesPerShard).map((bin) =>
        bin.map((itemIndex): PlacedSample => {
          const member = itemSample[itemIndex];
          return {
            part: samples.partOf(member),
            offset: samples.tokenOffsetOf(member),
            count: samples.tokenCountOf(member),
            spans: samples.spansOf(member),
            sourceId: copyId(samples.idOf(member), itemCopy[itemIndex]),
            foldedHookMessages: samples.foldedHookMessagesOf(member),
          };
        }),
      );
      return { sequences, sequenceLength: input.sequenceLength, padTokenId: settings.padTokenId, metadata };
    };
    // Encoded a few shards ahead of the one being stored, in order (each is tens of MB).
    const inFlight: Array<Promise<PackedShard>> = [];
    let submitted = 0;
    const submit = () => {
      if (submitted >= shardCount) return;
      const encoding = encoder.encode(requestFor(submitted++));
      // Awaited in turn below; until then a failure must not count as unhandled.
      encoding.catch(() => undefined);
      inFlight.push(encoding);
    };
    for (let ahead = 0; ahead <= shardsAhead; ahead++) submit();
    for (let shardIndex = 0; shardIndex < shardCount; shardIndex++) {
      const encoding = inFlight.shift()!;
      submit();
      const { bytes, tokens, trainedTokens } = await encoding;
      figures.tokens += tokens;
      figures.trainedTokens += trainedTokens;
      const name = `${split}/${shardName('packed', figures.shards++)}`;
      const info = await deps.store.put(deps.output.key(name), bytes, {
        contentType: 'application/vnd.apache.parquet',
      });
      out.objects.push(
        manifestObjectOf(info, {
          schemaVersion: SHARD_SCHEMA_VERSION,
          format: 'parquet',
          records: Math.min(input.sequencesPerShard, bins.length - shardIndex * input.sequencesPerShard),
          kind: 'packed',
        }),
      );
      out.files.packed[split].push(name);
      deps.progress({ message: `packed ${split} shard ${figures.shards}` });
    }
    figures.paddingTokens = figures.sequences * input.sequenceLength - figures.tokens;
    figures.fill = figures.sequences === 0 ? 0 : figures.tokens / (figures.sequences * input.sequenceLength);
    splitStats[split] = figures;
  }
  return splitStats;
}

/** LLaMA-Factory's dataset_info.json naming the exported splits. */
async function writeLlamaFactoryInfo(deps: StageDeps, out: FanInOutput): Promise<void> {
  const info = llamaFactoryDatasetInfo(
    Object.fromEntries(
      Object.entries(out.files.exports).flatMap(([split, byFormat]) =>
        byFormat?.['llama-factory'] ? [[`hat_sft_${split}`, `../${byFormat['llama-factory']}`]] : [],
      ),
    ),
  );
  const name = 'llama-factory/dataset_info.json';
  const stored = await deps.store.put(deps.output.key(name), `${JSON.stringify(info, null, 2)}\n`, {
    contentType: 'application/json',
  });
  out.objects.push(manifestObjectOf(stored, { schemaVersion: 1, format: 'json', kind: 'llama-factory-dataset-info' }));
  out.files.llamaFactoryInfo = name;
}

/** stats.json and the dataset card (README.md); returns the card's object. */
async function writeStatsAndCard(stats: ShardStats, deps: StageDeps, out: FanInOutput): Promise<ObjectInfo> {
  const statsInfo = await deps.store.put(deps.output.key('stats.json'), `${JSON.stringify(stats, null, 2)}\n`, {
    contentType: 'application/json',
  });
  out.objects.push(manifestObjectOf(statsInfo, { schemaVersion: SHARD_SCHEMA_VERSION, format: 'json', kind: 'stats' }));
  const cardInfo = await deps.store.put(deps.output.key('README.md'), renderDatasetCard(stats, out.files), {
    contentType: 'text/markdown; charset=utf-8',
  });
  out.objects.push(manifestObjectOf(cardInfo, { schemaVersion: SHARD_SCHEMA_VERSION, format: 'md', kind: 'card' }));
  return cardInfo;
}

/** Top refusal codes, most frequent first, each with its count and one example reason. */
function topRefusals(rejected: Record<string, number>, examples: ShardStats['rejectionExamples'], limit = 3): string {
  return Object.entries(rejected)
    .sort(([codeA, countA], [codeB, countB]) => countB - countA || (codeA < codeB ? -1 : 1))
    .slice(0, limit)
    .map(([code, count]) => {
      const example = examples.find((candidate) => candidate.code === code);
      return `${code} ×${count}${example ? ` (e.g. ${example.id}: ${example.reason.slice(0, 160)})` : ''}`;
    })
    .join('; ');
}

/**
 * Whether the shard refused too much: a shard that keeps no sample is a failure (the reasons
 * would otherwise sit unseen in stats.json behind a `done`), one that refuses more than
 * `warnShare` of its unique records warns with the top reasons.
 */
export function refusalCheck(figures: {
  records: number;
  duplicates: number;
  samples: number;
  rejected: Record<string, number>;
  rejectionExamples: ShardStats['rejectionExamples'];
  warnShare: number;
}): { share: number; empty?: string; warning?: string } {
  const refused = Object.values(figures.rejected).reduce((sum, count) => sum + count, 0);
  const unique = figures.records - figures.duplicates;
  const share = unique > 0 ? refused / unique : 0;
  const reasons = topRefusals(figures.rejected, figures.rejectionExamples);
  if (figures.samples === 0) {
    const why =
      figures.records === 0 ? 'the inputs hold no record' : `all ${refused} unique records were refused: ${reasons}`;
    return {
      share,
      empty: `the shard kept no sample: ${why}; fix the cause (see shared/text README for what each code means) or choose another template`,
    };
  }
  if (share > figures.warnShare) {
    return {
      share,
      warning: `refused ${refused} of ${unique} unique records (${(share * 100).toFixed(1)}%, more than ${(figures.warnShare * 100).toFixed(1)}%): ${reasons}`,
    };
  }
  return { share };
}

/**
 * The JSONL exports and verl Parquet of every split, streamed part by part in input order (the
 * conversations of all parts never sit in memory together).
 */
async function writeConversationFiles(
  input: ShardInput,
  parts: ShardPartOutput[],
  samples: SampleTable,
  setNames: string[],
  deps: StageDeps,
  figures: ShardStats['exports'],
  files: CardFiles,
  objects: ManifestObject[],
  write: { formats: readonly ExportFormat[]; verl: boolean },
): Promise<void> {
  // The table holds each part's samples together, in conversation order: part i's from partStart[i].
  const partStart = new Uint32Array(parts.length + 1);
  for (let index = 0; index < samples.length; index++) partStart[samples.partOf(index) + 1] = index + 1;
  for (let part = 1; part <= parts.length; part++) partStart[part] = Math.max(partStart[part], partStart[part - 1]);
  const writers = new Map<
    string,
    { writer: JsonlWriter<Record<string, unknown>>; split: ShardSplit; format: ExportFormat; name: string }
  >();
  const writerFor = (split: ShardSplit, format: ExportFormat) => {
    const id = `${split}/${format}`;
    let entry = writers.get(id);
    if (!entry) {
      const name = `${split}/${format}.jsonl.gz`;
      entry = { writer: JsonlWriter.open(deps.store, deps.output.key(name)), split, format, name };
      writers.set(id, entry);
    }
    return entry.writer;
  };
  const verlRows: Partial<Record<ShardSplit, Array<Record<string, unknown>>>> = {};
  const verlFiles: Partial<Record<ShardSplit, number>> = {};
  const flushVerl = async (split: ShardSplit, final: boolean) => {
    const rows = verlRows[split] ?? [];
    if (rows.length === 0 || (!final && rows.length < verlRowsPerFile)) return;
    const index = verlFiles[split] ?? 0;
    verlFiles[split] = index + 1;
    const name = `${split}/${shardName('verl', index)}`;
    const bytes = encodeParquetColumns(
      verlColumns,
      Object.fromEntries(verlColumns.map((column) => [column.name, rows.map((row) => row[column.name])])),
      {
        metadata: {
          'hat.schema_version': String(SHARD_SCHEMA_VERSION),
          'hat.split': split,
          'hat.format': 'verl-multiturn-sft',
        },
        rowGroupSize: 1024,
      },
    );
    const info: ObjectInfo = await deps.store.put(deps.output.key(name), bytes, {
      contentType: 'application/vnd.apache.parquet',
    });
    objects.push(
      manifestObjectOf(info, {
        schemaVersion: SHARD_SCHEMA_VERSION,
        format: 'parquet',
        records: rows.length,
        kind: 'verl-sft',
      }),
    );
    (files.verl[split] ??= []).push(name);
    verlRows[split] = [];
  };
  // Per distinct tool list (a run has a few harness variants): the JSON string literal the exports
  // carry, and verl's tools and tools_schema_hash columns, as UTF-8 bytes.
  const toolForms = new Map<string, { literal: Buffer; tools: Buffer; hash: Buffer }>();
  const toolFormsOf = (text: string) => {
    let forms = toolForms.get(text);
    if (!forms) {
      forms = {
        literal: Buffer.from(JSON.stringify(text)),
        tools: Buffer.from(text),
        hash: Buffer.from(toolsSchemaHash(JSON.parse(text) as ToolSpec[])),
      };
      if (toolForms.size >= 1024) toolForms.clear();
      toolForms.set(text, forms);
    }
    return forms;
  };
  const needed = [...new Set<ExportFormat>([...write.formats, ...(write.verl ? (['openai'] as const) : [])])];
  try {
    for (const [partIndex, part] of parts.entries()) {
      let cursor = partStart[partIndex];
      const end = partStart[partIndex + 1];
      if (cursor === end || needed.length === 0) continue;
      // What the table does not keep (task ids, export notes) is read again from the part's entries.
      const entries = await readEntries(deps.store, part.entries.key);
      const toolLists = (await readToolLists(deps.store, part.toolLists.key)).map(toolFormsOf);
      const readers = needed.map((format) => {
        const object = part.exportBodies.find((candidate) => candidate.format === format);
        if (!object)
          throw new HatError(
            'PART_OUTPUT_DAMAGED',
            `part ${part.index} wrote no ${format} bodies; rerun the stage (the part is redone)`,
          );
        return readExportBodies(deps.store, object.key)[Symbol.asyncIterator]();
      });
      try {
        for (let line = 0; ; line++) {
          const next = await Promise.all(readers.map((reader) => reader.next()));
          if (next.some((result) => result.done)) break;
          while (cursor < end && samples.conversationOf(cursor) < line) cursor++;
          if (cursor === end || samples.conversationOf(cursor) !== line || samples.copiesOf(cursor) === 0) continue;
          const sample = cursor;
          const entry = entries[samples.entryOf(sample)];
          const split = samples.splitOf(sample);
          const bodies = new Map(needed.map((format, index) => [format, next[index].value!.body]));
          const tools = toolLists[next[0].value!.toolList];
          if (tools === undefined)
            throw new HatError(
              'PART_OUTPUT_DAMAGED',
              `part ${part.index} names a tool list it did not write; rerun the stage (the part is redone)`,
            );
          for (let copy = 0; copy < samples.copiesOf(sample); copy++) {
            const lineage = {
              id: copyId(entry.id, copy),
              sourceId: entry.id,
              taskId: entry.taskId,
              foldedHookMessages: entry.foldedHookMessages ?? 0,
            };
            const suffix = lineageSuffix(lineage);
            for (const format of write.formats) {
              const body = bodies.get(format)!;
              const skipped = body.equals(jsonNull);
              const [foldedSystemMessages, droppedCallText] = entry.exportNotes?.[format] ?? [0, 0];
              addNotes(figures[format], {
                foldedSystemMessages,
                droppedCallText,
                ...(skipped ? { skipped: 'not carried by the format' } : {}),
              });
              if (!skipped)
                await writerFor(split, format).writeJsonBytes(...exportLinePieces(body, tools.literal, suffix));
            }
            if (write.verl) {
              (verlRows[split] ??= []).push({
                id: lineage.id,
                source_id: lineage.sourceId,
                task_id: lineage.taskId,
                data_source: setNames[samples.inputIndexOf(sample)],
                messages: verlMessagesOf(bodies.get('openai')),
                tools: tools.tools,
                tools_schema_hash: tools.hash,
                enable_thinking: input.enableThinking ?? null,
                folded_hook_messages: lineage.foldedHookMessages,
              });
              await flushVerl(split, false);
            }
          }
        }
      } finally {
        await Promise.all(readers.map((reader) => reader.return?.(undefined)));
      }
    }
    for (const split of shardSplits) await flushVerl(split, true);
  } catch (error) {
    await Promise.all([...writers.values()].map((entry) => entry.writer.abort(error)));
    throw error;
  }
  for (const entry of [...writers.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const result = await entry.writer.close();
    objects.push(
      manifestObjectOf(result, {
        schemaVersion: SHARD_SCHEMA_VERSION,
        format: 'jsonl.gz',
        kind: `sft-${entry.format}`,
      }),
    );
    ((files.exports[entry.split] ??= {}) as Record<string, string>)[entry.format] = entry.name;
  }
}

function addNotes(total: ShardStats['exports'][ExportFormat], notes: ExportNotes): void {
  if (notes.skipped !== undefined) total.skipped++;
  else total.records++;
  total.foldedSystemMessages += notes.foldedSystemMessages;
  total.droppedCallText += notes.droppedCallText;
}
