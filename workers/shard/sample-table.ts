import { createHash } from 'node:crypto';
import { HatError } from '../../shared/errors';
import { shardSplits, type ShardSplit } from './shard-contract';

/**
 * What the shard fan-in keeps of each accepted sample, in columns of typed arrays instead of one
 * parsed entry object per sample. The fan-in needs every sample at once (global deduplication,
 * splits by task, packing per split), so what it keeps grows with the run: as objects that was
 * about 800 bytes a sample (200,000 samples at 100,000 tasks: 160 MB, 1.6 GB at a million); here
 * it is about 130 bytes, and what only the exports need (the ids' lineage, export notes) is read
 * again from the part's entries when its part is written.
 */

type TypedArray = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array | BigUint64Array;

/** `array` with room for `length` elements (doubling), its contents kept. */
function withRoom<T extends TypedArray>(array: T, length: number): T {
  if (length <= array.length) return array;
  let size = Math.max(1024, array.length);
  while (size < length) size *= 2;
  const grown = new (array.constructor as new (size: number) => T)(size);
  grown.set(array as never);
  return grown;
}

const keyWords = 8;
const hexKey = /^[0-9a-f]{64}$/;

/**
 * An exact set of deduplication keys (sha256 hex, conversation-key.ts) held as 32 bytes each with
 * an open-addressing index, instead of a Set of 64-character strings (about 120 bytes each).
 * Keys compare in the order of their hex text.
 */
export class KeySet {
  private words = new Uint32Array(0);
  private slots = new Int32Array(1024).fill(-1);
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The key's index, and whether this call added it. A key that is not sha256 hex is a damaged part file. */
  add(key: string): { index: number; added: boolean } {
    if (!hexKey.test(key))
      throw new HatError(
        'PART_OUTPUT_DAMAGED',
        `a part entry's key "${key.slice(0, 80)}" is not a sha256; rerun the stage (the part is redone)`,
      );
    const words = new Uint32Array(keyWords);
    for (let word = 0; word < keyWords; word++) words[word] = Number.parseInt(key.slice(word * 8, word * 8 + 8), 16);
    const mask = this.slots.length - 1;
    for (let slot = words[0] & mask; ; slot = (slot + 1) & mask) {
      const index = this.slots[slot];
      if (index < 0) {
        this.words = withRoom(this.words, (this.count + 1) * keyWords);
        this.words.set(words, this.count * keyWords);
        this.slots[slot] = this.count;
        this.count++;
        if (this.count * 2 > this.slots.length) this.rehash();
        return { index: this.count - 1, added: true };
      }
      if (this.equals(index, words)) return { index, added: false };
    }
  }

  /** Negative, zero or positive as key `a`'s hex text sorts before, with or after key `b`'s. */
  compare(a: number, b: number): number {
    for (let word = 0; word < keyWords; word++) {
      const difference = this.words[a * keyWords + word] - this.words[b * keyWords + word];
      if (difference !== 0) return difference;
    }
    return 0;
  }

  /** The key's hex text. */
  hex(index: number): string {
    let text = '';
    for (let word = 0; word < keyWords; word++)
      text += this.words[index * keyWords + word].toString(16).padStart(8, '0');
    return text;
  }

  private equals(index: number, words: Uint32Array): boolean {
    for (let word = 0; word < keyWords; word++) if (this.words[index * keyWords + word] !== words[word]) return false;
    return true;
  }

  private rehash(): void {
    this.slots = new Int32Array(this.slots.length * 2).fill(-1);
    const mask = this.slots.length - 1;
    for (let index = 0; index < this.count; index++) {
      let slot = this.words[index * keyWords] & mask;
      while (this.slots[slot] >= 0) slot = (slot + 1) & mask;
      this.slots[slot] = index;
    }
  }
}

/** A task id as 64 bits (sha256 prefix): enough to tell a run's tasks apart without keeping their ids. */
export function taskHashOf(taskId: string): bigint {
  return createHash('sha256').update(taskId).digest().readBigUInt64BE(0);
}

/** One accepted, unique sample as the fan-in adds it to the table. */
export interface SampleFields {
  part: number;
  /** Its index among the part's entries. */
  entry: number;
  /** Its line among the part's export bodies (the part's `ok` entries, in order). */
  conversation: number;
  inputIndex: number;
  /** Index of its deduplication key in the fan-in's KeySet. */
  key: number;
  id: string;
  taskHash: bigint;
  /** The task's seeded split draw (split-assignment.ts taskDraw). */
  draw: number;
  heldOut: boolean;
  tokenOffset: number;
  tokenCount: number;
  spans: ReadonlyArray<readonly [number, number]>;
  foldedHookMessages: number;
}

const splitCodes = new Map<ShardSplit, number>(shardSplits.map((split, index) => [split, index]));

/** The numeric fields of a sample, each kept in a column of its own type. */
const numericColumns = {
  part: Uint32Array,
  entry: Uint32Array,
  conversation: Uint32Array,
  inputIndex: Uint16Array,
  key: Uint32Array,
  draw: Float64Array,
  tokenOffset: Float64Array,
  tokenCount: Uint32Array,
  foldedHookMessages: Uint32Array,
} as const;
type NumericField = keyof typeof numericColumns;

/** The accepted samples in the order the fan-in met them (parts in input order, entries in order). */
export class SampleTable {
  length = 0;
  private readonly numbers = Object.fromEntries(
    Object.entries(numericColumns).map(([field, Type]) => [field, new Type(0)]),
  ) as { [Field in NumericField]: InstanceType<(typeof numericColumns)[Field]> };
  private taskHash = new BigUint64Array(0);
  private heldOut = new Uint8Array(0);
  private splitCode = new Uint8Array(0);
  private copyCount = new Uint32Array(0);
  /** Span [start, end) pairs of every sample, flat; sample i's are from spanStart[i] to spanStart[i + 1]. */
  private spanValues = new Int32Array(0);
  private spanStart = new Uint32Array(1);
  /** Sample ids as UTF-8, back to back; sample i's bytes are from idStart[i] to idStart[i + 1]. */
  private idBytes = Buffer.alloc(0);
  private idStart = new Float64Array(1);

  add(fields: SampleFields): number {
    const index = this.length++;
    for (const field of Object.keys(numericColumns) as NumericField[]) {
      const column = withRoom(this.numbers[field] as TypedArray, this.length) as Exclude<TypedArray, BigUint64Array>;
      column[index] = fields[field];
      (this.numbers as Record<NumericField, TypedArray>)[field] = column;
    }
    this.taskHash = withRoom(this.taskHash, this.length);
    this.taskHash[index] = fields.taskHash;
    this.heldOut = withRoom(this.heldOut, this.length);
    this.heldOut[index] = fields.heldOut ? 1 : 0;
    this.splitCode = withRoom(this.splitCode, this.length);
    this.splitCode[index] = splitCodes.get('train')!;
    this.copyCount = withRoom(this.copyCount, this.length);
    this.copyCount[index] = 1;
    const spansFrom = this.spanStart[index];
    this.spanValues = withRoom(this.spanValues, spansFrom + fields.spans.length * 2);
    fields.spans.forEach(([start, end], position) => {
      this.spanValues[spansFrom + position * 2] = start;
      this.spanValues[spansFrom + position * 2 + 1] = end;
    });
    this.spanStart = withRoom(this.spanStart, this.length + 1);
    this.spanStart[this.length] = spansFrom + fields.spans.length * 2;
    const idFrom = this.idStart[index];
    const idLength = Buffer.byteLength(fields.id);
    if (this.idBytes.length < idFrom + idLength) {
      const grown = Buffer.alloc(Math.max(64 * 1024, this.idBytes.length * 2, idFrom + idLength));
      this.idBytes.copy(grown);
      this.idBytes = grown;
    }
    this.idBytes.write(fields.id, idFrom);
    this.idStart = withRoom(this.idStart, this.length + 1);
    this.idStart[this.length] = idFrom + idLength;
    return index;
  }

  partOf(index: number): number {
    return this.numbers.part[index];
  }
  entryOf(index: number): number {
    return this.numbers.entry[index];
  }
  conversationOf(index: number): number {
    return this.numbers.conversation[index];
  }
  inputIndexOf(index: number): number {
    return this.numbers.inputIndex[index];
  }
  keyOf(index: number): number {
    return this.numbers.key[index];
  }
  drawOf(index: number): number {
    return this.numbers.draw[index];
  }
  tokenOffsetOf(index: number): number {
    return this.numbers.tokenOffset[index];
  }
  tokenCountOf(index: number): number {
    return this.numbers.tokenCount[index];
  }
  foldedHookMessagesOf(index: number): number {
    return this.numbers.foldedHookMessages[index];
  }
  taskHashOf(index: number): bigint {
    return this.taskHash[index];
  }
  heldOutOf(index: number): boolean {
    return this.heldOut[index] === 1;
  }
  splitOf(index: number): ShardSplit {
    return shardSplits[this.splitCode[index]];
  }
  copiesOf(index: number): number {
    return this.copyCount[index];
  }
  idOf(index: number): string {
    return this.idBytes.toString('utf8', this.idStart[index], this.idStart[index + 1]);
  }
  spansOf(index: number): Array<[number, number]> {
    const spans: Array<[number, number]> = [];
    for (let value = this.spanStart[index]; value < this.spanStart[index + 1]; value += 2)
      spans.push([this.spanValues[value], this.spanValues[value + 1]]);
    return spans;
  }

  setSplit(index: number, split: ShardSplit): void {
    this.splitCode[index] = splitCodes.get(split)!;
  }
  setCopies(index: number, copies: number): void {
    this.copyCount[index] = copies;
  }
}
