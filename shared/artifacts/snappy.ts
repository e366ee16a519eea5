/**
 * Snappy compression (the raw block format Parquet pages use), written by hand because the
 * output must be the same bytes hyparquet-writer's own compressor produces (the shard stage's
 * Parquet files are pinned byte for byte), several times faster: hyparquet-writer appends every
 * output byte through a growing DataView; this writes into one buffer sized for the worst case.
 *
 * The match finder is the reference algorithm as hyparquet-writer runs it over the whole input
 * (no 64 KiB blocks): a hash table of 4-byte sequences (multiplier 0x1e35a7bd, at most 2^14
 * entries, sized down for short inputs, zeroed per call), candidates at most 65,535 bytes back,
 * the skip heuristic that looks at every byte for 32 misses and then strides further, the last
 * 15 bytes never starting a match, copies emitted as 64-byte pieces (60 when 65-67 bytes remain)
 * with the 2-byte form below 12 bytes and 2,048 back. Tested byte for byte against
 * hyparquet-writer (snappy.test.ts).
 */

const maxHashTableBits = 14;
const maxOffset = 0xffff;
const inputMargin = 15;
const hashMultiplier = 0x1e35a7bd;

const hashTables: Uint32Array[] = [];

/** Largest output for `length` input bytes: the varint header, literal tags every 60 bytes at worst, the bytes. */
function maxCompressedLength(length: number): number {
  return 32 + length + Math.ceil(length / 6);
}

// The emitters take the write position and return the next one (no closures over a mutable
// position: V8 keeps such a variable in a heap context, which made every output byte slower).

function emitLiteral(output: Uint8Array, out: number, input: Uint8Array, from: number, count: number): number {
  const value = count - 1;
  if (count <= 60) output[out++] = value << 2;
  else {
    const bytes = value < 0x100 ? 1 : value < 0x10000 ? 2 : value < 0x1000000 ? 3 : 4;
    output[out++] = (59 + bytes) << 2;
    for (let byte = 0; byte < bytes; byte++) output[out++] = (value >>> (byte * 8)) & 0xff;
  }
  if (count < 16) for (let index = 0; index < count; index++) output[out + index] = input[from + index];
  else output.set(input.subarray(from, from + count), out);
  return out + count;
}

function emitCopyPiece(output: Uint8Array, out: number, offset: number, count: number): number {
  if (count < 12 && offset < 2048) {
    output[out] = 1 + ((count - 4) << 2) + ((offset >>> 8) << 5);
    output[out + 1] = offset & 0xff;
    return out + 2;
  }
  output[out] = 2 + ((count - 1) << 2);
  output[out + 1] = offset & 0xff;
  output[out + 2] = offset >>> 8;
  return out + 3;
}

function emitCopy(output: Uint8Array, out: number, offset: number, count: number): number {
  while (count >= 68) {
    out = emitCopyPiece(output, out, offset, 64);
    count -= 64;
  }
  if (count > 64) {
    out = emitCopyPiece(output, out, offset, 60);
    count -= 60;
  }
  return emitCopyPiece(output, out, offset, count);
}

/**
 * How many bytes from `at` equal those from `from` (`from` < `at`), up to the end of the input:
 * byte by byte at first, then in growing chunks compared natively (long matches are runs of
 * padding and repeated prompts, thousands of bytes).
 */
function matchLength(input: Buffer, from: number, at: number): number {
  const most = input.length - at;
  let length = 0;
  while (length < most && length < 32) {
    if (input[at + length] !== input[from + length]) return length;
    length++;
  }
  let chunk = 256;
  while (length < most) {
    const size = Math.min(chunk, most - length);
    if (input.compare(input, from + length, from + length + size, at + length, at + length + size) !== 0) {
      while (input[at + length] === input[from + length]) length++;
      return length;
    }
    length += size;
    if (chunk < 1 << 16) chunk *= 2;
  }
  return length;
}

/** The 4 bytes at `at` as a little-endian int32, or 0 within 3 bytes of the end (a stride may look there; the value is then unused). */
function word(input: Uint8Array, at: number): number {
  return at + 3 < input.length ? input[at] | (input[at + 1] << 8) | (input[at + 2] << 16) | (input[at + 3] << 24) : 0;
}

function same4(input: Uint8Array, a: number, b: number): boolean {
  return (
    input[a] === input[b] &&
    input[a + 1] === input[b + 1] &&
    input[a + 2] === input[b + 2] &&
    input[a + 3] === input[b + 3]
  );
}

export function snappyCompress(input: Uint8Array): Uint8Array {
  return compressInto(input, new Uint8Array(maxCompressedLength(input.length)));
}

let scratch = new Uint8Array(0);

/**
 * snappyCompress into a buffer reused from call to call: the result is valid only until the next
 * call. For writers that copy it at once (a packed shard compresses thousands of 2 MiB pages, and
 * a fresh buffer per page was gigabytes of allocation that the garbage collector paid for).
 */
export function snappyCompressTransient(input: Uint8Array): Uint8Array {
  const needed = maxCompressedLength(input.length);
  if (scratch.length < needed) scratch = new Uint8Array(needed);
  return compressInto(input, scratch);
}

function compressInto(input: Uint8Array, output: Uint8Array): Uint8Array {
  const length = input.length;
  let out = 0;

  // Uncompressed length, little-endian base-128.
  let header = length;
  while (header >= 0x80) {
    output[out++] = (header & 0x7f) | 0x80;
    header >>>= 7;
  }
  output[out++] = header;

  let emitted = 0;
  if (length >= inputMargin) {
    const bytes = Buffer.from(input.buffer, input.byteOffset, length);
    let bits = 0;
    while (bits < maxHashTableBits && 1 << (bits + 1) <= length) bits++;
    const shift = 32 - bits;
    const table = (hashTables[bits] ??= new Uint32Array(1 << bits));
    table.fill(0);
    const limit = length - inputMargin;

    let position = 1;
    let nextHash = Math.imul(word(bytes, position), hashMultiplier) >>> shift;
    search: for (;;) {
      // Look for a 4-byte match, striding further after every 32 misses.
      let skip = 32;
      let next = position;
      let candidate: number;
      for (;;) {
        position = next;
        const current = nextHash;
        next = position + (skip++ >>> 5);
        if (position > limit) break search;
        nextHash = Math.imul(word(bytes, next), hashMultiplier) >>> shift;
        candidate = table[current];
        table[current] = position;
        if (position - candidate <= maxOffset && same4(bytes, position, candidate)) break;
      }
      out = emitLiteral(output, out, bytes, emitted, position - emitted);
      // Emit copies while the next position matches too.
      for (;;) {
        const matched = 4 + matchLength(bytes, candidate + 4, position + 4);
        out = emitCopy(output, out, position - candidate, matched);
        position += matched;
        emitted = position;
        if (position >= limit) break search;
        table[Math.imul(word(bytes, position - 1), hashMultiplier) >>> shift] = position - 1;
        const current = Math.imul(word(bytes, position), hashMultiplier) >>> shift;
        candidate = table[current];
        table[current] = position;
        if (!(position - candidate <= maxOffset && same4(bytes, position, candidate))) break;
      }
      position++;
      nextHash = Math.imul(word(bytes, position), hashMultiplier) >>> shift;
    }
  }
  if (emitted < length) out = emitLiteral(output, out, input, emitted, length - emitted);
  return output.subarray(0, out);
}
