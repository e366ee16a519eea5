import { gunzipSync } from 'node:zlib';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { isGzipKey } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { decodeUtf8Strict } from '../../shared/artifacts/utf8';
import { BadInputError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import type { EvalItem } from './eval-items';

/**
 * What training saw, for the contamination check: task ids, normalized prompt texts (every user
 * message and `prompt` field of collect/augment trajectories, shard conversations and distill
 * prompt sets) and HSA variant hashes (augment's `variants/<hash>/` objects and the
 * `harness.variantHash` of trajectories).
 */
export interface TrainingFootprint {
  taskIds: Set<string>;
  promptTexts: Set<string>;
  variantHashes: Set<string>;
  /** Variants stored by augment outputs (`variants/<hash>/`): hash → the directory's URI. */
  variantDirs: Map<string, string>;
  /** Training variants per HSA family, from trajectories' `harness.families` (hash → families). */
  variantFamilies: Map<string, string[]>;
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

const variantKey = /(?:^|\/)variants\/([0-9a-f]{16,64})\//;
const jsonlKey = /\.jsonl(\.gz)?$/;

function addRecord(footprint: TrainingFootprint, record: unknown): void {
  if (record === null || typeof record !== 'object') return;
  const value = record as Record<string, unknown>;
  for (const field of ['taskId', 'task_id']) if (typeof value[field] === 'string') footprint.taskIds.add(value[field]);
  // A task record itself (`hat tasks generate|import`): its id is the task id.
  if (typeof value.id === 'string' && Array.isArray(value.turns) && typeof value.room === 'object')
    footprint.taskIds.add(value.id);
  if (typeof value.prompt === 'string') footprint.promptTexts.add(normalizePromptText(value.prompt));
  if (Array.isArray(value.messages)) {
    for (const message of value.messages as Array<{ role?: unknown; content?: unknown }>) {
      if (message?.role === 'user' && typeof message.content === 'string')
        footprint.promptTexts.add(normalizePromptText(message.content));
    }
  }
  const harness = value.harness as { variantHash?: unknown; families?: unknown } | undefined;
  if (typeof harness?.variantHash === 'string') {
    footprint.variantHashes.add(harness.variantHash);
    if (Array.isArray(harness.families))
      footprint.variantFamilies.set(harness.variantHash, harness.families.map(String));
  }
}

/**
 * Reads the training manifests (or JSONL objects) and what they list; a manifest's lineage
 * inputs that are manifests themselves are followed too (a shard manifest leads to the collect
 * and augment outputs it was built from), each object read once.
 */
export async function readTrainingFootprint(
  uris: readonly string[],
  openObject: StageDeps['openObject'],
): Promise<TrainingFootprint> {
  const footprint: TrainingFootprint = {
    taskIds: new Set(),
    promptTexts: new Set(),
    variantHashes: new Set(),
    variantDirs: new Map(),
    variantFamilies: new Map(),
    objects: [],
  };
  const seen = new Set<string>();
  const visit = async (uri: string, depth: number, field: string): Promise<void> => {
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
          footprint.variantHashes.add(match[1]);
          const at = object.uri.lastIndexOf(`variants/${match[1]}/`);
          if (at >= 0) footprint.variantDirs.set(match[1], object.uri.slice(0, at + `variants/${match[1]}`.length));
        }
        if (jsonlKey.test(object.key)) await visit(object.uri, depth + 1, field);
      }
      if (depth < 3)
        for (const input of manifest.lineage.inputs)
          if (input.uri.endsWith('manifest.json') || jsonlKey.test(input.uri)) await visit(input.uri, depth + 1, field);
      return;
    }
    if (!jsonlKey.test(key)) {
      if (depth === 0)
        throw new BadInputError(
          'EVAL_BAD_TRAINING_MANIFEST',
          `${field}: ${uri} is neither a stage manifest.json nor JSONL; give the manifests of the collect, augment, shard or distill outputs`,
        );
      return;
    }
    const bytes = await store.getBuffer(key);
    footprint.objects.push({ uri, sha256: sha256Hex(bytes) });
    const text = decodeUtf8Strict(isGzipKey(key) ? gunzipSync(bytes) : bytes, uri);
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      try {
        addRecord(footprint, JSON.parse(line));
      } catch {
        // A line that is not JSON holds no ids or prompts to compare; the stage that wrote it checks its own format.
      }
    }
  };
  for (const uri of uris) await visit(uri, 0, 'trainingManifests');
  return footprint;
}

export interface Overlap {
  suite: string;
  itemId: string;
  matchedBy: 'task_id' | 'prompt_text';
}

/**
 * Eval items training saw: simulator tasks by task id (their ids hash their content; the viewer
 * phrasings alone repeat across tasks by design), prompts by normalized text.
 */
export function findOverlaps(items: readonly EvalItem[], footprint: TrainingFootprint): Overlap[] {
  const overlaps: Overlap[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    const key = `${item.suite}/${item.id}`;
    if (seen.has(key)) continue;
    if ('task' in item) {
      if (footprint.taskIds.has(item.task.id)) {
        seen.add(key);
        overlaps.push({ suite: item.suite, itemId: item.id, matchedBy: 'task_id' });
      }
    } else if (footprint.promptTexts.has(normalizePromptText(item.prompt))) {
      seen.add(key);
      overlaps.push({ suite: item.suite, itemId: item.id, matchedBy: 'prompt_text' });
    }
  }
  return overlaps;
}

/**
 * Held-out operator families that training variants applied: family → how many training variants
 * used it. A family every shard of the footprint held out of its train split (`heldOut.families`)
 * was not trained on, whatever the augment outputs behind the shard hold.
 */
export function trainedHeldOutFamilies(heldOut: readonly string[], footprint: TrainingFootprint): Map<string, number> {
  const used = new Map<string, number>();
  for (const families of footprint.variantFamilies.values())
    for (const family of families)
      if (heldOut.includes(family) && !footprint.shardHeldOutFamilies?.has(family))
        used.set(family, (used.get(family) ?? 0) + 1);
  return used;
}
