import type { Tokenizer } from '@huggingface/tokenizers';
import { GenerationalWordCache, wordCacheGeneration } from './word-cache';

/**
 * Byte-level BPE (GPT-2 style: Qwen2/Qwen3, Llama 3) on token ids instead of strings, for text
 * without added tokens (the sections the segmented encoder cuts at them). Written by hand because
 * it is the shard stage's hottest loop: @huggingface/tokenizers maps every piece to byte
 * characters, keys its merge ranks by `JSON.stringify([left, right])` and builds a node object
 * per symbol; this keeps ranks in an integer hash table keyed by the two ids and merges in reused
 * typed arrays. The result is the library's by construction:
 * - the same normalizer (NFC or none) and the library's own compiled split pattern (it rewrites
 *   Oniguruma's `\\s` and `(?i:...)` for JavaScript; Isolated: matches and the text between them
 *   are the pieces);
 * - each piece's UTF-8 bytes start as the ids of their byte characters, and the lowest-ranked
 *   adjacent pair is merged first, the leftmost among equal ranks (the library's rank plus
 *   position bias), until no pair has a rank; with `ignore_merges`, a piece that is one
 *   vocabulary token is that token.
 * `fromTokenizer` builds it only for tokenizers of exactly that shape (no dropout, byte fallback,
 * affixes or normalized added tokens, every byte and every merge result in the vocabulary) and
 * returns undefined otherwise. byte-level-bpe.golden.test.ts holds it to the library's ids on random and
 * rendered text, and every shard sample's ids are spot-checked against the library's own
 * whole-text encoding (verifyEncodingEvery).
 */

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** GPT-2's bytes_to_unicode: the character byte-level BPE uses for each byte value. */
function byteCharacters(): string[] {
  const visible = new Set<number>();
  for (let code = 33; code <= 126; code++) visible.add(code);
  for (let code = 161; code <= 172; code++) visible.add(code);
  for (let code = 174; code <= 255; code++) visible.add(code);
  const characters: string[] = new Array<string>(256);
  let next = 256;
  for (let byte = 0; byte < 256; byte++) characters[byte] = String.fromCharCode(visible.has(byte) ? byte : next++);
  return characters;
}

/** Merge ranks in an open-addressing table keyed by (left id, right id). */
class MergeTable {
  private readonly mask: number;
  private readonly lefts: Int32Array;
  private readonly rights: Int32Array;
  private readonly ranks: Int32Array;
  private readonly results: Int32Array;

  constructor(size: number) {
    let capacity = 1;
    while (capacity < size * 2) capacity <<= 1;
    this.mask = capacity - 1;
    this.lefts = new Int32Array(capacity).fill(-1);
    this.rights = new Int32Array(capacity);
    this.ranks = new Int32Array(capacity);
    this.results = new Int32Array(capacity);
  }

  private slot(left: number, right: number): number {
    return (Math.imul(left, 0x9e3779b1) ^ Math.imul(right + 0x7f4a7c15, 0x85ebca77)) & this.mask;
  }

  /** Adds a pair; false when it is already there. */
  set(left: number, right: number, rank: number, result: number): boolean {
    let slot = this.slot(left, right);
    while (this.lefts[slot] !== -1) {
      if (this.lefts[slot] === left && this.rights[slot] === right) return false;
      slot = (slot + 1) & this.mask;
    }
    this.lefts[slot] = left;
    this.rights[slot] = right;
    this.ranks[slot] = rank;
    this.results[slot] = result;
    return true;
  }

  /** The slot of the pair, or -1. */
  find(left: number, right: number): number {
    let slot = this.slot(left, right);
    for (;;) {
      const stored = this.lefts[slot];
      if (stored === -1) return -1;
      if (stored === left && this.rights[slot] === right) return slot;
      slot = (slot + 1) & this.mask;
    }
  }

  rankAt(slot: number): number {
    return this.ranks[slot];
  }

  resultAt(slot: number): number {
    return this.results[slot];
  }
}

export class ByteLevelBpe {
  private readonly cache = new GenerationalWordCache<number[]>(wordCacheGeneration);
  private readonly encoder = new TextEncoder();
  private bytes = new Uint8Array(1024);
  // Per symbol of the word being merged: its id, neighbours (-1: none) and whether it is still there.
  private ids = new Int32Array(1024);
  private previous = new Int32Array(1024);
  private following = new Int32Array(1024);
  private alive = new Uint8Array(1024);
  // A binary heap of candidate merges ordered by (rank, left position), each with the pair it was made for.
  private heapRanks = new Int32Array(1024);
  private heapPositions = new Int32Array(1024);
  private heapLefts = new Int32Array(1024);
  private heapRights = new Int32Array(1024);
  private heapSize = 0;

  private constructor(
    private readonly pattern: RegExp,
    private readonly nfc: boolean,
    private readonly byteIds: Int32Array,
    private readonly merges: MergeTable,
    /** With `ignore_merges`: byte-level strings of the vocabulary and their ids. */
    private readonly wholeTokens: Map<string, number> | undefined,
    private readonly characters: string[],
  ) {}

  /** The fast encoder for this tokenizer, or undefined when it is not exactly the supported shape. */
  static fromTokenizer(tokenizer: Tokenizer, tokenizerJson: JsonObject): ByteLevelBpe | undefined {
    const model = tokenizerJson.model;
    const normalizer = tokenizerJson.normalizer ?? null;
    const preTokenizer = tokenizerJson.pre_tokenizer;
    if (!isObject(model) || model.type !== 'BPE' || !isObject(model.vocab) || !Array.isArray(model.merges)) return;
    if (model.dropout != null || model.byte_fallback === true || model.unk_token != null) return;
    if ((model.continuing_subword_prefix ?? '') !== '' || (model.end_of_word_suffix ?? '') !== '') return;
    if ((model as { continuing_subword_suffix?: unknown }).continuing_subword_suffix != null) return;
    if (normalizer !== null && !(isObject(normalizer) && normalizer.type === 'NFC')) return;
    if (!isObject(preTokenizer) || preTokenizer.type !== 'Sequence' || !Array.isArray(preTokenizer.pretokenizers))
      return;
    const [split, byteLevel, ...rest] = preTokenizer.pretokenizers as unknown[];
    if (rest.length > 0 || !isObject(split) || !isObject(byteLevel)) return;
    if (split.type !== 'Split' || split.behavior !== 'Isolated' || split.invert !== false) return;
    if (byteLevel.type !== 'ByteLevel' || byteLevel.add_prefix_space !== false || byteLevel.use_regex !== false) return;
    const added = Array.isArray(tokenizerJson.added_tokens) ? (tokenizerJson.added_tokens as JsonObject[]) : [];
    if (added.some((token) => (token.normalized ?? token.special !== true) === true)) return;
    // The library's own compiled pattern, so the pieces are its pieces.
    const libraryPattern = (tokenizer as unknown as { pre_tokenizer?: { tokenizers?: Array<{ pattern?: unknown }> } })
      .pre_tokenizer?.tokenizers?.[0]?.pattern;
    if (!(libraryPattern instanceof RegExp) || !libraryPattern.global) return;

    const vocabulary = new Map<string, number>();
    // for...in, not Object.entries: no [token, id] array per entry (150k of them, most of this build's time).
    const vocab = model.vocab;
    for (const token in vocab) {
      const id = vocab[token];
      if (typeof id === 'number') vocabulary.set(token, id);
    }
    const characters = byteCharacters();
    const byteIds = new Int32Array(256);
    for (let byte = 0; byte < 256; byte++) {
      const id = vocabulary.get(characters[byte]);
      if (id === undefined) return;
      byteIds[byte] = id;
    }
    // The library's own merge pairs when it has them (it splits `"a b"` entries with split(' ', 2),
    // as below), so the pairs are its pairs and 100k-300k entries are not split twice.
    const libraryMerges = (tokenizer as unknown as { model?: { merges?: unknown } }).model?.merges;
    const mergeList =
      Array.isArray(libraryMerges) && libraryMerges.length === model.merges.length
        ? (libraryMerges as unknown[])
        : (model.merges as unknown[]);
    const merges = new MergeTable(mergeList.length);
    for (const [rank, entry] of mergeList.entries()) {
      const pair = Array.isArray(entry) ? entry : typeof entry === 'string' ? entry.split(' ', 2) : [];
      if (pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') return;
      const left = vocabulary.get(pair[0]);
      const right = vocabulary.get(pair[1]);
      const result = vocabulary.get(pair[0] + pair[1]);
      // A merge of tokens outside the vocabulary, or into one, is not the plain case.
      if (left === undefined || right === undefined || result === undefined) return;
      // A pair listed twice (the library's rank map would keep the later rank): not the plain case.
      if (!merges.set(left, right, rank, result)) return;
    }
    const pattern = new RegExp(libraryPattern.source, libraryPattern.flags);
    return new ByteLevelBpe(
      pattern,
      normalizer !== null,
      byteIds,
      merges,
      model.ignore_merges === true ? vocabulary : undefined,
      characters,
    );
  }

  /** Token ids of a text that holds no added token. */
  encode(text: string): number[] {
    const normalized = this.nfc ? text.normalize('NFC') : text;
    const ids: number[] = [];
    let position = 0;
    for (const match of normalized.matchAll(this.pattern)) {
      if (position < match.index) this.addPiece(normalized.slice(position, match.index), ids);
      if (match[0].length > 0) this.addPiece(match[0], ids);
      position = match.index + match[0].length;
    }
    if (position < normalized.length) this.addPiece(normalized.slice(position), ids);
    return ids;
  }

  private addPiece(piece: string, ids: number[]): void {
    let pieceIds = this.cache.get(piece);
    if (pieceIds === undefined) {
      pieceIds = this.mergePiece(piece);
      this.cache.put(piece, pieceIds);
    }
    for (let index = 0; index < pieceIds.length; index++) ids.push(pieceIds[index]);
  }

  private mergePiece(piece: string): number[] {
    if (this.bytes.length < piece.length * 3) this.grow(piece.length * 3);
    const count = this.encoder.encodeInto(piece, this.bytes).written;
    if (this.wholeTokens) {
      let characters = '';
      for (let index = 0; index < count; index++) characters += this.characters[this.bytes[index]];
      const whole = this.wholeTokens.get(characters);
      if (whole !== undefined) return [whole];
    }
    const { ids, previous, following, alive } = this;
    for (let index = 0; index < count; index++) {
      ids[index] = this.byteIds[this.bytes[index]];
      previous[index] = index - 1;
      following[index] = index + 1 < count ? index + 1 : -1;
      alive[index] = 1;
    }
    this.heapSize = 0;
    for (let index = 0; index + 1 < count; index++) this.offer(index, index + 1);
    while (this.heapSize > 0) {
      const position = this.heapPositions[0];
      const left = this.heapLefts[0];
      const right = this.heapRights[0];
      this.pop();
      const next = following[position];
      // Stale: one of the two symbols merged into something else since this pair was offered.
      if (alive[position] === 0 || next < 0 || ids[position] !== left || ids[next] !== right) continue;
      ids[position] = this.merges.resultAt(this.merges.find(left, right));
      alive[next] = 0;
      const after = following[next];
      following[position] = after;
      if (after >= 0) previous[after] = position;
      if (previous[position] >= 0) this.offer(previous[position], position);
      if (after >= 0) this.offer(position, after);
    }
    const result: number[] = [];
    for (let index = 0; index >= 0; index = following[index]) result.push(ids[index]);
    return count === 0 ? [] : result;
  }

  /** Adds the merge of the symbols at `left` and `right` when the pair has a rank. */
  private offer(left: number, right: number): void {
    const slot = this.merges.find(this.ids[left], this.ids[right]);
    if (slot < 0) return;
    const rank = this.merges.rankAt(slot);
    let index = this.heapSize++;
    if (index >= this.heapRanks.length) this.growHeap();
    // Sift up by (rank, position).
    while (index > 0) {
      const parent = (index - 1) >> 1;
      const parentRank = this.heapRanks[parent];
      if (parentRank < rank || (parentRank === rank && this.heapPositions[parent] < left)) break;
      this.move(parent, index);
      index = parent;
    }
    this.heapRanks[index] = rank;
    this.heapPositions[index] = left;
    this.heapLefts[index] = this.ids[left];
    this.heapRights[index] = this.ids[right];
  }

  private pop(): void {
    const last = --this.heapSize;
    if (last === 0) return;
    const rank = this.heapRanks[last];
    const position = this.heapPositions[last];
    const left = this.heapLefts[last];
    const right = this.heapRights[last];
    let index = 0;
    for (;;) {
      let child = index * 2 + 1;
      if (child >= last) break;
      const other = child + 1;
      if (
        other < last &&
        (this.heapRanks[other] < this.heapRanks[child] ||
          (this.heapRanks[other] === this.heapRanks[child] && this.heapPositions[other] < this.heapPositions[child]))
      )
        child = other;
      if (this.heapRanks[child] > rank || (this.heapRanks[child] === rank && this.heapPositions[child] > position))
        break;
      this.move(child, index);
      index = child;
    }
    this.heapRanks[index] = rank;
    this.heapPositions[index] = position;
    this.heapLefts[index] = left;
    this.heapRights[index] = right;
  }

  private move(from: number, to: number): void {
    this.heapRanks[to] = this.heapRanks[from];
    this.heapPositions[to] = this.heapPositions[from];
    this.heapLefts[to] = this.heapLefts[from];
    this.heapRights[to] = this.heapRights[from];
  }

  private grow(size: number): void {
    let capacity = this.bytes.length;
    while (capacity < size) capacity *= 2;
    this.bytes = new Uint8Array(capacity);
    this.ids = new Int32Array(capacity);
    this.previous = new Int32Array(capacity);
    this.following = new Int32Array(capacity);
    this.alive = new Uint8Array(capacity);
  }

  private growHeap(): void {
    const grown = (old: Int32Array) => {
      const array = new Int32Array(old.length * 2);
      array.set(old);
      return array;
    };
    this.heapRanks = grown(this.heapRanks);
    this.heapPositions = grown(this.heapPositions);
    this.heapLefts = grown(this.heapLefts);
    this.heapRights = grown(this.heapRights);
  }
}
