import { createHash } from 'node:crypto';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { readJsonlTextLines } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { BadInputError } from '../../shared/errors';
import type { SuiteItem } from './suites/eval-suite';
import { evalSuiteOf } from './suites/registry';

/**
 * What training saw, for the contamination and held-out checks: task ids, HSA variant hashes
 * (augment's `variants/<hash>/` objects, trajectories' `harness.variantHash`, rl episodes'
 * `variant_hash`) with the families each applied and the stages that used it. Prompt text is not
 * kept: training records are streamed past an n-gram index of the eval items (`NgramIndex`).
 */
export interface TrainingFootprint {
  taskIds: Set<string>;
  variantHashes: Set<string>;
  /** Variants stored by augment outputs (`variants/<hash>/`): hash → the directory's URI. */
  variantDirs: Map<string, string>;
  /** Training variants' HSA families (hash → families), from trajectories and rl episodes. */
  variantFamilies: Map<string, string[]>;
  /** The stages whose records used each variant (hash → stage names: collect, augment, rl, …; `training data` for bare JSONL). */
  variantStages: Map<string, Set<string>>;
  /** Families every shard manifest read holds out of training (`heldOut.families`); undefined: no shard read. */
  shardHeldOutFamilies?: Set<string>;
  /** Objects read, with their sha256 (lineage). */
  objects: Array<{ uri: string; sha256: string }>;
}

/** Case, width, punctuation and spacing removed: two prompts that differ only in those are the same prompt. */
export function normalizePromptText(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** N-gram overlap settings (config `contamination`). */
export interface NgramSettings {
  /** Words per n-gram (13: the common decontamination practice). */
  n: number;
  /** Share of an item's distinct n-grams one training record must hold for the item to count as seen. */
  threshold: number;
}

/** One training record that holds an eval item's text. */
export interface OverlapHit {
  /** The record's id (`id`, `prompt_id`, `task_id`, … when it has one), else `line N`. */
  record: string;
  /** The object it is in. */
  source: string;
  line: number;
  /** Share of the item's n-grams in that record (1 for a short item matched whole). */
  share: number;
}

export interface Overlap {
  suite: string;
  itemId: string;
  matchedBy: 'task_id' | 'prompt_text' | 'ngram';
  /** Text matches: the first training records that hold the item (up to 5) and how many do. */
  hits?: OverlapHit[];
  records?: number;
}

/** Records kept per overlapping item (the count of all is kept too). */
const hitsPerItem = 5;

/** A 53-bit key of a word sequence: two 32-bit FNV-style lanes (collisions are negligible at eval-item scale). */
function gramKey(words: readonly string[], start: number, length: number): number {
  let left = 0x811c9dc5;
  let right = 0x01000193;
  for (let index = start; index < start + length; index += 1) {
    const word = words[index];
    for (let at = 0; at < word.length; at += 1) {
      const code = word.charCodeAt(at);
      left = Math.imul(left ^ code, 0x01000193);
      right = Math.imul(right ^ code, 0x5bd1e995);
    }
    left = Math.imul(left ^ 0x20, 0x01000193);
    right = Math.imul(right ^ 0x20, 0x5bd1e995);
  }
  return (left >>> 0) * 0x200000 + ((right >>> 0) & 0x1fffff);
}

/**
 * The eval items' word n-grams, hashed, to stream training records past: memory grows with the
 * eval items, not with the training data. Items with fewer than n words match a training text
 * (one message or prompt) only when it is the same normalized text.
 */
export class NgramIndex {
  private readonly grams = new Map<number, number[]>();
  private readonly gramCounts: number[] = [];
  private readonly shortTexts = new Map<string, number[]>();
  private readonly found = new Map<number, { hits: OverlapHit[]; records: number; best: number }>();

  constructor(
    private readonly items: ReadonlyArray<{ suite: string; id: string; text: string }>,
    readonly settings: NgramSettings,
  ) {
    items.forEach((item, index) => {
      const normalized = normalizePromptText(item.text);
      const words = normalized === '' ? [] : normalized.split(' ');
      if (words.length < settings.n) {
        if (normalized !== '') this.shortTexts.set(normalized, [...(this.shortTexts.get(normalized) ?? []), index]);
        this.gramCounts.push(0);
        return;
      }
      const distinct = new Set<number>();
      for (let start = 0; start + settings.n <= words.length; start += 1)
        distinct.add(gramKey(words, start, settings.n));
      for (const key of distinct) {
        const owners = this.grams.get(key);
        if (owners) owners.push(index);
        else this.grams.set(key, [index]);
      }
      this.gramCounts.push(distinct.size);
    });
  }

  get size(): number {
    return this.items.length;
  }

  /** Checks one training record's texts (its messages, content parts, tool results, prompt fields). */
  checkRecord(texts: readonly string[], record: Omit<OverlapHit, 'share'>): void {
    if (this.items.length === 0 || texts.length === 0) return;
    const matched = new Map<number, Set<number>>();
    for (const text of texts) {
      const normalized = normalizePromptText(text);
      if (normalized === '') continue;
      for (const index of this.shortTexts.get(normalized) ?? []) this.hit(index, { ...record, share: 1 });
      if (this.grams.size === 0) continue;
      // A record's texts are joined word runs of their own: an n-gram never spans two messages.
      const words = normalized.split(' ');
      for (let start = 0; start + this.settings.n <= words.length; start += 1) {
        const key = gramKey(words, start, this.settings.n);
        const owners = this.grams.get(key);
        if (!owners) continue;
        for (const index of owners) {
          let keys = matched.get(index);
          if (!keys) matched.set(index, (keys = new Set()));
          keys.add(key);
        }
      }
    }
    for (const [index, keys] of matched) {
      const share = keys.size / this.gramCounts[index];
      if (share >= this.settings.threshold) this.hit(index, { ...record, share: Math.round(share * 1000) / 1000 });
    }
  }

  private hit(index: number, hit: OverlapHit): void {
    const entry = this.found.get(index) ?? { hits: [], records: 0, best: 0 };
    entry.records += 1;
    entry.best = Math.max(entry.best, hit.share);
    if (entry.hits.length < hitsPerItem) entry.hits.push(hit);
    this.found.set(index, entry);
  }

  /** The items training records held, in item order. */
  overlaps(): Overlap[] {
    return [...this.found.entries()]
      .sort(([left], [right]) => left - right)
      .map(([index, entry]) => ({
        suite: this.items[index].suite,
        itemId: this.items[index].id,
        matchedBy: this.gramCounts[index] === 0 ? ('prompt_text' as const) : ('ngram' as const),
        hits: entry.hits,
        records: entry.records,
      }));
  }
}

const variantKey = /(?:^|\/)variants\/([0-9a-f]{16,64})\//;
const jsonlKey = /\.jsonl(\.gz)?$/;
const recordIdFields = ['id', 'record_id', 'recordId', 'prompt_id', 'trajectoryId', 'trajectory_id'] as const;

/** A message's text: a string, or the text of its content parts (`[{ type: 'text', text }]`). */
function contentText(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const parts = content
    .map((part) =>
      part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string'
        ? (part as { text: string }).text
        : typeof part === 'string'
          ? part
          : undefined,
    )
    .filter((text): text is string => text !== undefined);
  return parts.length > 0 ? parts.join('\n') : undefined;
}

/** Messages given as an array or as a JSON string of one (rl episode records). */
function messagesOf(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (typeof value === 'string' && value.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // Plain text that starts with a bracket: compared as the prompt text it is.
    }
  }
  return [];
}

/** Every text a training record holds that a model was shown or trained on: messages of every role (content parts, tool results), prompts, instructions. */
export function recordTexts(value: Record<string, unknown>): string[] {
  const texts: string[] = [];
  for (const field of ['messages', 'conversations', 'prompt']) {
    const messages = messagesOf(value[field]);
    for (const message of messages) {
      if (message === null || typeof message !== 'object') continue;
      const entry = message as { content?: unknown; value?: unknown };
      const text = contentText(entry.content) ?? contentText(entry.value);
      if (text !== undefined) texts.push(text);
    }
    if (messages.length === 0 && typeof value[field] === 'string') texts.push(value[field]);
  }
  for (const field of ['instruction', 'input', 'question', 'text'])
    if (typeof value[field] === 'string') texts.push(value[field]);
  return texts;
}

function recordIdOf(value: Record<string, unknown>, line: number): string {
  for (const field of recordIdFields) {
    const id = value[field];
    if (typeof id === 'string' || typeof id === 'number') return String(id);
  }
  for (const field of ['taskId', 'task_id'] as const)
    if (typeof value[field] === 'string') {
      const index = value.index ?? value.sample_index;
      return typeof index === 'number' ? `${value[field]}#${index}` : `${value[field]}`;
    }
  return `line ${line}`;
}

function addVariant(footprint: TrainingFootprint, hash: string, families: unknown, stage: string): void {
  footprint.variantHashes.add(hash);
  if (Array.isArray(families)) footprint.variantFamilies.set(hash, families.map(String));
  let stages = footprint.variantStages.get(hash);
  if (!stages) footprint.variantStages.set(hash, (stages = new Set()));
  stages.add(stage);
}

function addRecord(footprint: TrainingFootprint, value: Record<string, unknown>, stage: string): void {
  for (const field of ['taskId', 'task_id']) if (typeof value[field] === 'string') footprint.taskIds.add(value[field]);
  // A task record itself (`hat tasks generate|import`): its id is the task id.
  if (typeof value.id === 'string' && Array.isArray(value.turns) && typeof value.room === 'object')
    footprint.taskIds.add(value.id);
  const harness = value.harness as { variantHash?: unknown; families?: unknown } | undefined;
  if (typeof harness?.variantHash === 'string') addVariant(footprint, harness.variantHash, harness.families, stage);
  // An rl episode record: flat columns.
  if (typeof value.variant_hash === 'string') addVariant(footprint, value.variant_hash, value.harness_families, stage);
}

/**
 * Streams one JSONL object's records (strict UTF-8 and the record size limit, as every reader:
 * readJsonlTextLines) and returns the object's sha256: the one its manifest records when known,
 * else hashed from the same read. Line numbers count blank lines, as an editor does.
 */
async function streamRecords(
  store: ArtifactStore,
  key: string,
  known: string | undefined,
  onRecord: (value: Record<string, unknown>, line: number) => void,
): Promise<string> {
  const hash = known === undefined ? createHash('sha256') : undefined;
  const lines = readJsonlTextLines(store, key, hash ? { onStoredBytes: (chunk) => hash.update(chunk) } : {});
  for await (const { text, lineNumber } of lines) {
    if (text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      // A line that is not JSON holds no ids or prompts to compare; the stage that wrote it checks its own format.
      continue;
    }
    if (value !== null && typeof value === 'object' && !Array.isArray(value))
      onRecord(value as Record<string, unknown>, lineNumber);
  }
  return known ?? hash!.digest('hex');
}

/**
 * Reads the training manifests (or JSONL objects) and what they list, streaming every record past
 * `index` (the eval items' n-grams) when given; a manifest's lineage inputs that are manifests
 * themselves are followed too (a shard manifest leads to the collect and augment outputs it was
 * built from), each object read once. Records are attributed to the stage of the manifest that
 * lists them.
 */
export async function readTrainingFootprint(
  uris: readonly string[],
  openObject: StageDeps['openObject'],
  index?: NgramIndex,
): Promise<TrainingFootprint> {
  const footprint: TrainingFootprint = {
    taskIds: new Set(),
    variantHashes: new Set(),
    variantDirs: new Map(),
    variantFamilies: new Map(),
    variantStages: new Map(),
    objects: [],
  };
  const seen = new Set<string>();
  const visit = async (uri: string, depth: number, field: string, stage: string, sha256?: string): Promise<void> => {
    if (seen.has(uri)) return;
    seen.add(uri);
    const { store, key } = openObject(uri);
    if (!(await store.head(key))) {
      if (depth === 0)
        throw new BadInputError(
          'MISSING_INPUT',
          `${field}: ${uri} does not exist; check the URI or run the stage that writes it`,
        );
      return;
    }
    if (key.endsWith('manifest.json')) {
      const manifest = await readManifest(store, key);
      const settings = (manifest.stats as { settings?: { heldOut?: { families?: unknown } } }).settings;
      if (manifest.stage === 'shard') {
        const families = Array.isArray(settings?.heldOut?.families) ? settings.heldOut.families.map(String) : [];
        footprint.shardHeldOutFamilies = new Set(
          footprint.shardHeldOutFamilies
            ? families.filter((family) => footprint.shardHeldOutFamilies?.has(family))
            : families,
        );
      }
      for (const object of manifest.objects) {
        const match = variantKey.exec(object.key);
        if (match) {
          addVariant(footprint, match[1], undefined, manifest.stage);
          const at = object.uri.lastIndexOf(`variants/${match[1]}/`);
          if (at >= 0) footprint.variantDirs.set(match[1], object.uri.slice(0, at + `variants/${match[1]}`.length));
        }
        if (jsonlKey.test(object.key)) await visit(object.uri, depth + 1, field, manifest.stage, object.sha256);
      }
      if (depth < 3)
        for (const input of manifest.lineage.inputs)
          if (input.uri.endsWith('manifest.json') || jsonlKey.test(input.uri))
            await visit(
              input.uri,
              depth + 1,
              field,
              manifest.stage,
              jsonlKey.test(input.uri) ? input.sha256 : undefined,
            );
      return;
    }
    if (!jsonlKey.test(key)) {
      if (depth === 0)
        throw new BadInputError(
          'EVAL_BAD_TRAINING_MANIFEST',
          `${field}: ${uri} is neither a stage manifest.json nor JSONL; give the manifests of the collect, augment, shard, distill or rl outputs`,
        );
      return;
    }
    const read = await streamRecords(store, key, sha256, (value, line) => {
      addRecord(footprint, value, stage);
      index?.checkRecord(recordTexts(value), { record: recordIdOf(value, line), source: uri, line });
    });
    footprint.objects.push({ uri, sha256: read });
  };
  for (const uri of uris) await visit(uri, 0, 'trainingManifests', 'training data');
  return footprint;
}

/** The text items of a config (IFEval, custom) the n-gram index is built from. */
export function textItemsOf(items: readonly SuiteItem[]): Array<{ suite: string; id: string; text: string }> {
  return items.flatMap((item) => {
    const text = evalSuiteOf(item.suite).contaminationText?.(item);
    return text === undefined ? [] : [{ suite: item.suite, id: item.id, text }];
  });
}

/**
 * Simulator-task items training saw, by task id (their ids hash their content; the viewer
 * phrasings alone repeat across tasks by design). Text items are found by `NgramIndex`.
 */
export function findTaskOverlaps(items: readonly SuiteItem[], footprint: TrainingFootprint): Overlap[] {
  const overlaps: Overlap[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    const key = `${item.suite}/${item.id}`;
    const task = evalSuiteOf(item.suite).simulatorTask?.(item);
    if (seen.has(key) || !task || !footprint.taskIds.has(task.id)) continue;
    seen.add(key);
    overlaps.push({ suite: item.suite, itemId: item.id, matchedBy: 'task_id' });
  }
  return overlaps;
}

// Held-out operators (harness_variant_qa's): what training applied of the families it holds out.
export { trainedHeldOutFamilies, trainedHeldOutVariants, type TrainedFamily } from './suites/held-out-operators';
