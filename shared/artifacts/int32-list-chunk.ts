import { endianness } from 'node:os';
import { snappyCompressTransient } from './snappy';

/**
 * One column chunk of a list<int32> column (required elements, no empty lists), PLAIN values
 * and SNAPPY pages, written as exactly the bytes hyparquet-writer's `writeColumn` writes for the
 * same rows with one data page v2 and no statistics or page index: the same page header, the
 * same RLE/bit-packed levels, the same compressed values. Tokenized shards are millions of such
 * values per row group, and hyparquet-writer writes each one through a DataView call with range
 * checks; here the values go to the compressor as the bytes of the Int32Array they already are.
 * parquet-codec.ts uses it only where it applies and otherwise calls hyparquet-writer itself;
 * int32-list-chunk.test.ts holds the two to the same bytes.
 */

/** The file writer of hyparquet-writer (its ByteWriter), as far as a chunk writer uses it. */
export interface ChunkByteWriter {
  offset: number;
  appendBytes(bytes: Uint8Array): void;
}

/** What hyparquet-writer's writeColumn returns for a chunk without indexes or bloom filter. */
export interface WrittenChunk {
  chunk: {
    meta_data: {
      type: 'INT32';
      encodings: ['PLAIN'];
      path_in_schema: string[];
      codec: 'SNAPPY';
      num_values: bigint;
      total_compressed_size: bigint;
      total_uncompressed_size: bigint;
      data_page_offset: bigint;
      dictionary_page_offset: undefined;
      statistics: undefined;
      encoding_stats: undefined;
      geospatial_statistics: undefined;
    };
    file_offset: bigint;
  };
  columnIndex: undefined;
  offsetIndex: undefined;
  bloomFilter: undefined;
}

type PageHeaderWriter = (writer: ChunkByteWriter, header: Record<string, unknown>) => void;

const littleEndian = endianness() === 'LE';

/** Whether rows [start, end) can take this path: values in an Int32Array on a little-endian machine, no empty row. */
export function fitsInt32ListChunk(
  values: ArrayLike<unknown>,
  lengths: ArrayLike<number>,
  start: number,
  end: number,
): values is Int32Array {
  if (!littleEndian || !(values instanceof Int32Array)) return false;
  for (let row = start; row < end; row++) if (lengths[row] === 0) return false;
  return true;
}

const levelBuffers = { repetition: new Uint8Array(0), definition: new Uint8Array(0) };

/** `count` levels of 1 in a buffer reused across chunks (a chunk's levels are consumed before the next chunk). */
function levelScratch(count: number, which: keyof typeof levelBuffers): Uint8Array {
  if (levelBuffers[which].length < count) levelBuffers[which] = new Uint8Array(count);
  return levelBuffers[which].subarray(0, count).fill(1);
}

/** A growing byte buffer for the level runs (a page's levels are a few bytes per row). */
class LevelBytes {
  bytes = new Uint8Array(256);
  length = 0;

  push(byte: number): void {
    if (this.length === this.bytes.length) {
      const grown = new Uint8Array(this.bytes.length * 2);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes[this.length++] = byte;
  }

  varint(value: number): void {
    while (value >= 0x80) {
      this.push((value & 0x7f) | 0x80);
      value >>>= 7;
    }
    this.push(value);
  }
}

/**
 * Levels of bit width 1 in Parquet's RLE/bit-packed hybrid, chosen as hyparquet-writer chooses:
 * from each position, a run of 8 or more equal levels is one RLE run; otherwise the next 8 levels
 * (whatever they are, zero-padded past the end) join the pending bit-packed groups, which are
 * flushed as one bit-packed run before the next RLE run or at the end.
 */
function encodeLevels(levels: Uint8Array, into: LevelBytes): number {
  const before = into.length;
  let pendingGroups = 0;
  let pendingStart = 0;
  const flushGroups = () => {
    into.varint((pendingGroups << 1) | 1);
    for (let group = 0; group < pendingGroups; group++) {
      let byte = 0;
      for (let bit = 0; bit < 8; bit++) {
        const index = pendingStart + group * 8 + bit;
        if (index < levels.length) byte |= (levels[index] & 1) << bit;
      }
      into.push(byte);
    }
    pendingGroups = 0;
  };
  let index = 0;
  while (index < levels.length) {
    const value = levels[index];
    // Levels are 0 or 1: the run ends where the other value first appears (a native scan).
    const other = levels.indexOf(value ^ 1, index + 1);
    const run = (other < 0 ? levels.length : other) - index;
    if (run >= 8) {
      if (pendingGroups > 0) flushGroups();
      into.varint(run << 1);
      into.push(value);
      index += run;
    } else {
      if (pendingGroups === 0) pendingStart = index;
      pendingGroups++;
      index += 8;
    }
  }
  if (pendingGroups > 0) flushGroups();
  return into.length - before;
}

/**
 * Encoded levels by row shape, for chunks whose rows all have one length (packed sequences: every
 * row is the sequence length, so every full row group has the same levels).
 */
const uniformLevels = new Map<string, { levels: Uint8Array; repetitionBytes: number; definitionBytes: number }>();

function chunkLevels(
  rowStarts: ArrayLike<number>,
  start: number,
  end: number,
): { levels: Uint8Array; repetitionBytes: number; definitionBytes: number } {
  const length = rowStarts[start + 1] - rowStarts[start];
  let uniform = true;
  for (let row = start + 1; row < end && uniform; row++) uniform = rowStarts[row + 1] - rowStarts[row] === length;
  const key = `${end - start}x${length}`;
  const known = uniform ? uniformLevels.get(key) : undefined;
  if (known) return known;
  const valueStart = rowStarts[start];
  const count = rowStarts[end] - valueStart;
  const repetition = levelScratch(count, 'repetition');
  for (let row = start; row < end; row++) repetition[rowStarts[row] - valueStart] = 0;
  const bytes = new LevelBytes();
  const repetitionBytes = encodeLevels(repetition, bytes);
  const definitionBytes = encodeLevels(levelScratch(count, 'definition'), bytes);
  const encoded = { levels: bytes.bytes.slice(0, bytes.length), repetitionBytes, definitionBytes };
  if (uniform && uniformLevels.size < 64) uniformLevels.set(key, encoded);
  return encoded;
}

/**
 * Writes rows [start, end) of a flat list<int32> column as one column chunk; `rowStarts[row]` is
 * the index of the row's first value. `writePageHeader` is hyparquet-writer's own, so the page
 * header's Thrift bytes come from the library.
 */
export function writeInt32ListChunk(options: {
  writer: ChunkByteWriter;
  writePageHeader: PageHeaderWriter;
  pathInSchema: string[];
  values: Int32Array;
  rowStarts: ArrayLike<number>;
  start: number;
  end: number;
}): WrittenChunk {
  const { writer, values, rowStarts, start, end } = options;
  const valueStart = rowStarts[start];
  const valueEnd = rowStarts[end];
  const count = valueEnd - valueStart;
  const { levels, repetitionBytes, definitionBytes } = chunkLevels(rowStarts, start, end);
  const page = new Uint8Array(values.buffer, values.byteOffset + valueStart * 4, count * 4);
  // Copied into the file writer below, before the next page is compressed.
  const compressed = snappyCompressTransient(page);

  const offsetStart = writer.offset;
  options.writePageHeader(writer, {
    type: 'DATA_PAGE_V2',
    uncompressed_page_size: levels.length + page.length,
    compressed_page_size: levels.length + compressed.length,
    data_page_header_v2: {
      num_values: count,
      num_nulls: 0,
      num_rows: end - start,
      encoding: 'PLAIN',
      definition_levels_byte_length: definitionBytes,
      repetition_levels_byte_length: repetitionBytes,
      is_compressed: true,
    },
  });
  const headerSize = writer.offset - offsetStart;
  writer.appendBytes(levels);
  writer.appendBytes(compressed);
  return {
    chunk: {
      meta_data: {
        type: 'INT32',
        encodings: ['PLAIN'],
        path_in_schema: options.pathInSchema,
        codec: 'SNAPPY',
        num_values: BigInt(count),
        total_compressed_size: BigInt(writer.offset - offsetStart),
        total_uncompressed_size: BigInt(headerSize + levels.length + page.length),
        data_page_offset: BigInt(offsetStart),
        dictionary_page_offset: undefined,
        statistics: undefined,
        encoding_stats: undefined,
        geospatial_statistics: undefined,
      },
      file_offset: BigInt(offsetStart),
    },
    columnIndex: undefined,
    offsetIndex: undefined,
    bloomFilter: undefined,
  };
}
