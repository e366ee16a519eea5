import { endianness } from 'node:os';
import { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readJsonl, readJsonlLineBytes } from '../../shared/artifacts/jsonl-reader';
import { HatError } from '../../shared/errors';
import type { ExportFormat } from './shard-contract';

/**
 * What a part hands to the fan-in (under `_parts/`, scratch: not listed in the manifest):
 * - `<part>.entries.jsonl.gz`: one entry per input record, in record order;
 * - `<part>.tools.jsonl.gz`: the part's distinct tool lists, one JSON text per line, in the order
 *   its samples first used them.
 * - `<part>.export-<format>.jsonl.gz`: per export format (and `openai` when verl Parquet is on),
 *   one line per `ok` entry in the same order: the index of its tool list, a tab, and the JSON
 *   text of the accepted conversation as trained (truncated ones cut) in that format without its
 *   tools and lineage (export-formats.ts `exportBody`), or `null` where the format cannot carry
 *   it. The fan-in adds the tools and each copy's lineage (`exportLinePieces`) and cuts verl's
 *   messages from the openai text, so conversations are converted and serialized in the parallel
 *   parts, not in the one fan-in job, and each tool list is serialized once per part. Gzip level
 *   1: scratch.
 * - `<part>.tokens.bin`: the accepted samples' token ids, little-endian int32, concatenated.
 * The fan-in needs every entry (dedup, split, packing) but reads the export lines only while
 * writing the JSONL exports, one part at a time.
 */

export const partEntrySchema = z.object({
  /** Record index within the input object. */
  record: z.number().int().nonnegative(),
  /** Trajectory id (source id of the sample). */
  id: z.string(),
  taskId: z.string(),
  variantHash: z.string().optional(),
  families: z.array(z.string()).optional(),
  /** Deduplication key (conversation-key.ts). */
  key: z.string(),
  /** `duplicate`: an earlier record of the same part had the same key (not tokenized). */
  status: z.enum(['ok', 'rejected', 'duplicate']),
  /** Rejection code and reason. */
  code: z.string().optional(),
  reason: z.string().optional(),
  /** Tokens of an ok sample: offset in the part's token file, count, trained count. */
  tokenOffset: z.number().int().nonnegative().optional(),
  tokenCount: z.number().int().nonnegative().optional(),
  trainedTokens: z.number().int().nonnegative().optional(),
  /** Trained token ranges [start, end) within the sample. */
  spans: z.array(z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()])).optional(),
  /** Messages cut from the end to fit the sequence length (over-length truncation). */
  droppedMessages: z.number().int().positive().optional(),
  /** Tokens of the conversation before truncation. */
  originalTokens: z.number().int().positive().optional(),
  /** Hook system messages folded into neighbouring turns for the template (absent: none were). */
  foldedHookMessages: z.number().int().positive().optional(),
  /** Served-prompt characters trained as part of a merged first token (thinking templates; absent: none). */
  mergedPromptChars: z.number().int().positive().optional(),
  /** Per export format: [system messages folded, assistant texts dropped] by its conversion (absent: none). */
  exportNotes: z
    .record(z.string(), z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]))
    .optional(),
});
export type PartEntry = z.infer<typeof partEntrySchema>;

export function partFileKeys(
  prefix: (name: string) => string,
  partId: string,
): { entries: string; tokens: string; toolLists: string; exportBodies(format: ExportFormat): string } {
  return {
    entries: prefix(`_parts/${partId}.entries.jsonl.gz`),
    toolLists: prefix(`_parts/${partId}.tools.jsonl.gz`),
    tokens: prefix(`_parts/${partId}.tokens.bin`),
    exportBodies: (format) => prefix(`_parts/${partId}.export-${format}.jsonl.gz`),
  };
}

const littleEndian = endianness() === 'LE';

/** Token ids as little-endian int32 bytes (a view of the array on little-endian machines). */
export function encodeTokens(ids: Int32Array): Buffer {
  if (littleEndian) return Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength);
  const bytes = Buffer.alloc(ids.length * 4);
  for (let index = 0; index < ids.length; index++) bytes.writeInt32LE(ids[index], index * 4);
  return bytes;
}

export async function readEntries(store: ArtifactStore, key: string): Promise<PartEntry[]> {
  const entries: PartEntry[] = [];
  for await (const entry of readJsonl(store, key, { schema: partEntrySchema })) entries.push(entry);
  return entries;
}

/** A part's export bodies of one format, in `ok` entry order: the tool list index and the body's UTF-8 JSON bytes (`null` for skipped). */
export async function* readExportBodies(
  store: ArtifactStore,
  key: string,
): AsyncGenerator<{ toolList: number; body: Buffer }> {
  for await (const line of readJsonlLineBytes(store, key)) {
    const tab = line.indexOf(0x09);
    const toolList = tab > 0 ? Number(line.toString('latin1', 0, tab)) : NaN;
    if (!Number.isInteger(toolList) || toolList < 0)
      throw new HatError(
        'PART_OUTPUT_DAMAGED',
        `${store.uriOf(key)}: an export body line without its tool list index; rerun the stage (the part is redone)`,
      );
    yield { toolList, body: line.subarray(tab + 1) };
  }
}

/** A part's distinct tool lists as JSON texts, by index. */
export async function readToolLists(store: ArtifactStore, key: string): Promise<string[]> {
  const lists: string[] = [];
  for await (const line of readJsonlLineBytes(store, key)) lists.push(line.toString('utf8'));
  return lists;
}
