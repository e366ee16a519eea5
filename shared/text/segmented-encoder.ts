import { ownString } from './word-cache';
import type { Tokenizer } from '@huggingface/tokenizers';
import { ByteLevelBpe } from './byte-level-bpe';

/**
 * Encodes rendered conversations to exactly the ids the tokenizer gives for the whole text, and
 * says where given character offsets fall in the tokens, with one encode pass at most and
 * usually much less: rendered SFT text repeats (the same system prompt and tool definitions in
 * every conversation of a harness), so segments are encoded once and remembered.
 *
 * Why the segments are exact, not approximations:
 * - The tokenizer itself splits the text at added tokens (`<|im_start|>`, `<think>`, ...) before
 *   anything else and encodes each section on its own (@huggingface/tokenizers `encode_text`),
 *   so encoding section by section is the same computation, provided no added token strips its
 *   neighbours (`lstrip`/`rstrip`/`single_word`) and no pre-tokenizer looks at the section's
 *   position (Metaspace with `prepend_scheme: first`). Tokenizers that break either rule are
 *   encoded whole.
 * - Within a section, the Qwen2/Qwen3 and Llama-3 pre-tokenizer patterns always end a piece at the
 *   end of a newline run that is followed by a visible character (every alternative that can
 *   consume a newline stops at the first non-whitespace character after it, and the newline-run
 *   alternative comes before the lookahead ones), BPE never merges across pieces, and NFC never
 *   composes across a newline. So sections of those tokenizers are further cut into lines. Other
 *   pre-tokenizers keep whole sections.
 * Where an offset falls inside a segment, byte-level token lengths place it (each byte-level
 * token character is one UTF-8 byte); where that cannot work (a segment that normalization
 * changes, a token outside the byte alphabet), the segment is encoded in two halves and compared,
 * as a piecewise check would.
 */

export interface EncodedText {
  /** Token ids, equal to the tokenizer's encoding of the whole text (no special tokens added). */
  ids: number[];
  /** Per requested offset: the index of the token that starts there (`ids.length` at the end of the text), or -1 when the offset falls inside a token. */
  tokenIndex: number[];
}

/** Pre-tokenizer patterns (Qwen2/Qwen3, Llama 3) known to end a piece after a newline run followed by a visible character. */
const lineSafePatterns = new Set([
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
]);

/**
 * Characters of segments remembered per generation (about 2 bytes each, plus 8 bytes an id); two
 * generations keep the recently used ones. What repeats (system prompts, tool definitions of a
 * harness variant) is used again within a generation and so stays: 4 million characters hold the
 * system prompts and tool definitions of a 200-variant pool (about 9,000 characters each). At 16 million a shard thread held about 100 MB more for no gain:
 * the 10,000-task shard stage took 78-80 s of CPU at 4 million against 83-87 s at 16 million.
 */
const memoGenerationCharacters = 4_000_000;
/** Longer segments are encoded every time rather than kept. */
const memoMaxCharacters = 64_000;

/** A line ends after a newline run when a visible character (not whitespace, not a combining mark) follows. */
const lineStart = /(?<=\n)(?=[^\s\p{M}])/gu;

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The 256 characters byte-level BPE uses for the 256 byte values (GPT-2's bytes_to_unicode). */
function byteLevelAlphabet(): Set<string> {
  const visible: number[] = [];
  for (let code = 33; code <= 126; code++) visible.push(code);
  for (let code = 161; code <= 172; code++) visible.push(code);
  for (let code = 174; code <= 255; code++) visible.push(code);
  const alphabet = new Set(visible.map((code) => String.fromCharCode(code)));
  let next = 256;
  for (let byte = 0; byte < 256; byte++) if (!visible.includes(byte)) alphabet.add(String.fromCharCode(next++));
  return alphabet;
}

function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** An offset between the two halves of one character: never a token boundary of the text's characters. */
function splitsSurrogatePair(text: string, offset: number): boolean {
  const high = text.charCodeAt(offset - 1);
  const low = text.charCodeAt(offset);
  return high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff;
}

function usesSectionPosition(preTokenizer: unknown): boolean {
  return JSON.stringify(preTokenizer ?? null).includes('"Metaspace"');
}

function isLineSafe(preTokenizer: unknown): boolean {
  if (!isObject(preTokenizer) || preTokenizer.type !== 'Sequence' || !Array.isArray(preTokenizer.pretokenizers))
    return false;
  const [split, byteLevel, ...rest] = preTokenizer.pretokenizers as unknown[];
  if (rest.length > 0 || !isObject(split) || !isObject(byteLevel)) return false;
  const pattern = isObject(split.pattern) ? split.pattern.Regex : undefined;
  return (
    split.type === 'Split' &&
    split.behavior === 'Isolated' &&
    split.invert === false &&
    typeof pattern === 'string' &&
    lineSafePatterns.has(pattern) &&
    byteLevel.type === 'ByteLevel' &&
    byteLevel.add_prefix_space === false &&
    byteLevel.use_regex === false
  );
}

interface Segment {
  /** Character offset in the text. */
  start: number;
  end: number;
  /** Index of its first token in the ids. */
  tokenStart: number;
  tokenEnd: number;
  /** True for an added token (one id, never split). */
  added: boolean;
}

export class SegmentedEncoder {
  /** Why the encoder encodes whole texts (undefined when it segments). */
  readonly wholeTextReason?: string;
  private readonly addedSplitter?: RegExp;
  private readonly addedIds = new Map<string, number>();
  private readonly lineSplit: boolean;
  private readonly byteLevel: boolean;
  /** Byte-level BPE on ids for text between added tokens, when the tokenizer has that exact shape (byte-level-bpe.ts). */
  private readonly sectionEncoder?: ByteLevelBpe;
  private tokenBytes?: Int32Array;
  private young = new Map<string, number[]>();
  private old = new Map<string, number[]>();
  private youngCharacters = 0;

  constructor(
    private readonly tokenizer: Tokenizer,
    tokenizerJson: JsonObject,
    config: JsonObject,
  ) {
    const addedTokens = Array.isArray(tokenizerJson.added_tokens) ? (tokenizerJson.added_tokens as JsonObject[]) : [];
    const normalizer = tokenizerJson.normalizer ?? null;
    const model = isObject(tokenizerJson.model) ? tokenizerJson.model : {};
    const decoder = isObject(tokenizerJson.decoder) ? tokenizerJson.decoder : {};
    this.byteLevel = decoder.type === 'ByteLevel' && model.type === 'BPE' && model.byte_fallback !== true;
    if (addedTokens.some((token) => token.lstrip === true || token.rstrip === true || token.single_word === true)) {
      this.wholeTextReason = 'an added token strips or bounds its neighbours';
    } else if (usesSectionPosition(tokenizerJson.pre_tokenizer)) {
      this.wholeTextReason = 'the pre-tokenizer depends on the section position (Metaspace)';
    } else if (config.remove_space === true || config.do_lowercase_and_remove_accent === true) {
      this.wholeTextReason = 'the tokenizer config rewrites whole sections';
    }
    // Added tokens matched in the raw text (the tokenizer's first split); normalized ones are
    // matched inside sections after normalization, which encoding a section does itself.
    const rawTokens = addedTokens.filter(
      (token) =>
        typeof token.content === 'string' &&
        token.content !== '' &&
        !(token.normalized === true && normalizer !== null),
    );
    for (const token of addedTokens)
      if (typeof token.content === 'string' && typeof token.id === 'number') this.addedIds.set(token.content, token.id);
    if (rawTokens.length > 0) {
      // Longest first: at each position the alternation takes the longest token, as the tokenizer's trie does.
      const contents = [...new Set(rawTokens.map((token) => token.content as string))].sort(
        (a, b) => b.length - a.length,
      );
      this.addedSplitter = new RegExp(contents.map(escapeRegExp).join('|'), 'g');
    }
    if (this.wholeTextReason === undefined) this.sectionEncoder = ByteLevelBpe.fromTokenizer(tokenizer, tokenizerJson);
    this.lineSplit =
      this.wholeTextReason === undefined &&
      isLineSafe(tokenizerJson.pre_tokenizer) &&
      (normalizer === null || (isObject(normalizer) && normalizer.type === 'NFC')) &&
      !addedTokens.some((token) => typeof token.content === 'string' && token.content.includes('\n'));
  }

  /** Token ids of `text` and the token index at each of `offsets`; see EncodedText. */
  encodeAt(text: string, offsets: readonly number[]): EncodedText {
    if (this.wholeTextReason !== undefined) return this.encodeWhole(text, offsets);
    const ids: number[] = [];
    const segments: Segment[] = [];
    const addSection = (start: number, end: number) => {
      if (end <= start) return;
      if (!this.lineSplit) {
        this.addPiece(text, start, end, ids, segments);
        return;
      }
      const section = text.slice(start, end);
      const cuts = [start];
      for (const match of section.matchAll(lineStart)) cuts.push(start + match.index);
      cuts.push(end);
      this.addLines(text, cuts, ids, segments);
    };
    let position = 0;
    if (this.addedSplitter) {
      for (const match of text.matchAll(this.addedSplitter)) {
        addSection(position, match.index);
        const tokenStart = ids.length;
        ids.push(this.addedIds.get(match[0])!);
        segments.push({
          start: match.index,
          end: match.index + match[0].length,
          tokenStart,
          tokenEnd: tokenStart + 1,
          added: true,
        });
        position = match.index + match[0].length;
      }
    }
    addSection(position, text.length);
    return { ids, tokenIndex: offsets.map((offset) => this.locate(text, ids, segments, offset)) };
  }

  /**
   * The lines between consecutive `cuts` of one section. Runs of lines the memo does not hold are
   * encoded in one call (each cut is a pre-tokenizer boundary, so the run's ids are its lines'
   * ids one after another: the same argument that allows cutting at lines), then split back into
   * lines by byte-level token lengths and remembered line by line. Where a split cannot be placed
   * exactly, the run's lines are encoded one by one.
   */
  private addLines(text: string, cuts: number[], ids: number[], segments: Segment[]): void {
    let line = 0;
    const lines = cuts.length - 1;
    while (line < lines) {
      const start = cuts[line];
      if (cuts[line + 1] <= start) {
        line++;
        continue;
      }
      if (!this.byteLevel || this.remembered(text.slice(start, cuts[line + 1])) !== undefined) {
        this.addPiece(text, start, cuts[line + 1], ids, segments);
        line++;
        continue;
      }
      let last = line + 1;
      while (
        last < lines &&
        cuts[last + 1] > cuts[last] &&
        this.remembered(text.slice(cuts[last], cuts[last + 1])) === undefined
      )
        last++;
      if (last - line < 2 || !this.addRun(text, cuts.slice(line, last + 1), ids, segments)) {
        for (let index = line; index < last; index++) this.addPiece(text, cuts[index], cuts[index + 1], ids, segments);
      }
      line = last;
    }
  }

  /** One encode for the lines between `cuts`; false (nothing added) when the ids do not split exactly at every cut. */
  private addRun(text: string, cuts: number[], ids: number[], segments: Segment[]): boolean {
    const runIds = this.encodeSection(text.slice(cuts[0], cuts[cuts.length - 1]));
    const lengths = this.byteLengths();
    const normalize = (value: string) =>
      this.tokenizer.normalizer ? this.tokenizer.normalizer.normalize(value) : value;
    const split: number[][] = [];
    let token = 0;
    for (let index = 0; index + 1 < cuts.length; index++) {
      const target = utf8Length(normalize(text.slice(cuts[index], cuts[index + 1])));
      const first = token;
      let bytes = 0;
      while (bytes < target && token < runIds.length) {
        const length = lengths[runIds[token]] ?? -1;
        if (length < 0) return false;
        bytes += length;
        token++;
      }
      if (bytes !== target) return false;
      split.push(runIds.slice(first, token));
    }
    if (token !== runIds.length) return false;
    for (let index = 0; index < split.length; index++) {
      const start = cuts[index];
      const end = cuts[index + 1];
      const lineIds = split[index];
      this.remember(text.slice(start, end), lineIds);
      const tokenStart = ids.length;
      for (const id of lineIds) ids.push(id);
      segments.push({ start, end, tokenStart, tokenEnd: ids.length, added: false });
    }
    return true;
  }

  private remembered(piece: string): number[] | undefined {
    return this.young.get(piece) ?? this.old.get(piece);
  }

  private addPiece(text: string, start: number, end: number, ids: number[], segments: Segment[]): void {
    if (end <= start) return;
    const pieceIds = this.encodePiece(text.slice(start, end));
    const tokenStart = ids.length;
    for (const id of pieceIds) ids.push(id);
    segments.push({ start, end, tokenStart, tokenEnd: ids.length, added: false });
  }

  /** The tokenizer's own encoding of any text. */
  private encodeIds(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** The encoding of text that holds no added token (a section or part of one): the same ids, faster where it can be. */
  private encodeSection(text: string): number[] {
    return this.sectionEncoder ? this.sectionEncoder.encode(text) : this.encodeIds(text);
  }

  private encodePiece(piece: string): number[] {
    const ids = this.young.get(piece);
    if (ids !== undefined) return ids;
    const found = this.old.get(piece) ?? this.encodeSection(piece);
    this.remember(piece, found);
    return found;
  }

  private remember(piece: string, ids: number[]): void {
    if (piece.length <= memoMaxCharacters) {
      if (this.youngCharacters + piece.length > memoGenerationCharacters) {
        this.old = this.young;
        this.young = new Map();
        this.youngCharacters = 0;
      }
      // A piece is cut from a whole rendered conversation; kept as it is, it would keep that alive.
      this.young.set(ownString(piece), ids);
      this.youngCharacters += piece.length;
    }
  }

  private locate(text: string, ids: number[], segments: Segment[], offset: number): number {
    if (offset === text.length) return ids.length;
    if (offset < 0 || offset > text.length || splitsSurrogatePair(text, offset)) return -1;
    // The last segment starting at or before the offset.
    let low = 0;
    let high = segments.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (segments[middle].start <= offset) low = middle;
      else high = middle - 1;
    }
    const segment = segments[low];
    if (segment === undefined) return -1;
    if (segment.start === offset) return segment.tokenStart;
    if (segment.added) return -1;
    return this.locateInside(text, ids, segment, offset);
  }

  /** A token index inside one segment: by byte-level token lengths, else by encoding its two halves. */
  private locateInside(text: string, ids: number[], segment: Segment, offset: number): number {
    const piece = text.slice(segment.start, segment.end);
    const cut = offset - segment.start;
    if (this.byteLevel) {
      // Tokens cover the normalized text: place the cut there, unless it splits a composition.
      const normalize = (value: string) =>
        this.tokenizer.normalizer ? this.tokenizer.normalizer.normalize(value) : value;
      const before = normalize(piece.slice(0, cut));
      const normalized = normalize(piece);
      if (normalized !== piece && before + normalize(piece.slice(cut)) !== normalized) return -1;
      const lengths = this.byteLengths();
      const target = utf8Length(before);
      let bytes = 0;
      let known = true;
      for (let index = segment.tokenStart; index < segment.tokenEnd; index++) {
        if (bytes === target) return index;
        const length = lengths[ids[index]] ?? -1;
        if (length < 0) {
          known = false;
          break;
        }
        bytes += length;
        if (bytes > target) return -1;
      }
      if (known) return -1;
    }
    const left = this.encodeSection(piece.slice(0, cut));
    const right = this.encodeSection(piece.slice(cut));
    const count = segment.tokenEnd - segment.tokenStart;
    if (left.length + right.length !== count) return -1;
    for (let index = 0; index < count; index++) {
      const expected = index < left.length ? left[index] : right[index - left.length];
      if (ids[segment.tokenStart + index] !== expected) return -1;
    }
    return segment.tokenStart + left.length;
  }

  /** UTF-8 bytes each token id stands for, -1 where unknown (built once). */
  private byteLengths(): Int32Array {
    if (!this.tokenBytes) {
      const alphabet = byteLevelAlphabet();
      const vocabulary = this.tokenizer.get_vocab(true);
      let size = 0;
      for (const id of vocabulary.values()) size = Math.max(size, id + 1);
      const lengths = new Int32Array(size).fill(-1);
      for (const [token, id] of vocabulary) {
        let byteLevelToken = token.length > 0;
        for (const character of token) {
          if (!alphabet.has(character)) {
            byteLevelToken = false;
            break;
          }
        }
        if (byteLevelToken) lengths[id] = token.length;
      }
      for (const [content, id] of this.addedIds) if (id < size) lengths[id] = utf8Length(content);
      this.tokenBytes = lengths;
    }
    return this.tokenBytes;
  }

  /** Whole-text encoding, offsets placed by encoding the pieces between them and comparing. */
  private encodeWhole(text: string, offsets: readonly number[]): EncodedText {
    const ids = this.encodeIds(text);
    const cuts = [
      ...new Set([
        0,
        ...offsets.filter((offset) => offset >= 0 && offset <= text.length && !splitsSurrogatePair(text, offset)),
        text.length,
      ]),
    ].sort((a, b) => a - b);
    const indexAt = new Map<number, number>([[0, 0]]);
    let position = 0;
    for (let index = 1; index < cuts.length; index++) {
      const pieceIds = this.encodeIds(text.slice(cuts[index - 1], cuts[index]));
      if (!pieceIds.every((id, offset) => ids[position + offset] === id)) break;
      position += pieceIds.length;
      indexAt.set(cuts[index], position);
    }
    // A cut inside a token shifts every later piece; the text end must land on the last token.
    if (indexAt.get(text.length) !== undefined && indexAt.get(text.length) !== ids.length) indexAt.clear();
    return { ids, tokenIndex: offsets.map((offset) => indexAt.get(offset) ?? -1) };
  }
}
