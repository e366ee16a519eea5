import type { ArtifactStore, ObjectInfo } from './artifact-store';
import { sha256Hex } from '../hash/hash';
import { BadInputError } from '../errors';
import { fitsInt32ListChunk, writeInt32ListChunk } from './int32-list-chunk';
import { snappyCompress } from './snappy';

/**
 * Parquet for tokenized shards and columnar episode data, through hyparquet-writer (write) and
 * hyparquet (read). Both are ESM-only; Node >= 20.19 loads them with require(esm), and jest
 * transforms them (see jest.config.js).
 *
 * Column types are declared, never guessed: guessing types from data turns an all-integer float
 * column into INT32 and fails on empty files. Lists are written in the standard three-level LIST
 * layout that Arrow, DuckDB, pandas and Hugging Face datasets read.
 */
export type ParquetScalarType = 'INT32' | 'INT64' | 'FLOAT' | 'DOUBLE' | 'BOOLEAN' | 'STRING' | 'JSON';
export type ParquetColumnType = ParquetScalarType | { list: Exclude<ParquetScalarType, 'JSON'> };

export interface ParquetColumn {
  name: string;
  type: ParquetColumnType;
  /** Allow null values (default false). */
  nullable?: boolean;
}

export interface ParquetEncodeOptions {
  /** Key-value metadata stored in the file footer (schema version, tokenizer fingerprint...). */
  metadata?: Record<string, string>;
  /** Rows per row group (default 10,000). */
  rowGroupSize?: number;
}

type SchemaElement = Record<string, unknown>;

const scalarSchema: Record<ParquetScalarType, SchemaElement> = {
  INT32: { type: 'INT32' },
  INT64: { type: 'INT64' },
  FLOAT: { type: 'FLOAT' },
  DOUBLE: { type: 'DOUBLE' },
  BOOLEAN: { type: 'BOOLEAN' },
  STRING: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  JSON: { type: 'BYTE_ARRAY', converted_type: 'JSON' },
};

function schemaOf(columns: readonly ParquetColumn[]): SchemaElement[] {
  const schema: SchemaElement[] = [{ name: 'root', num_children: columns.length }];
  for (const column of columns) {
    const repetition = column.nullable ? 'OPTIONAL' : 'REQUIRED';
    if (typeof column.type === 'string') {
      schema.push({ name: column.name, repetition_type: repetition, ...scalarSchema[column.type] });
    } else {
      schema.push({ name: column.name, repetition_type: repetition, converted_type: 'LIST', num_children: 1 });
      schema.push({ name: 'list', repetition_type: 'REPEATED', num_children: 1 });
      schema.push({ name: 'element', repetition_type: 'REQUIRED', ...scalarSchema[column.type.list] });
    }
  }
  return schema;
}

function columnValue(column: ParquetColumn, value: unknown, row: number): unknown {
  if (value === undefined || value === null) {
    if (column.nullable) return null;
    throw new BadInputError('BAD_PARQUET_ROW', `row ${row}: column "${column.name}" is required but missing`);
  }
  const type = column.type;
  if (type === 'INT64') return BigInt(value as number | bigint);
  // JSON columns take the value itself: the writer serializes it and readers parse it back.
  if (type === 'JSON') return value;
  if (typeof type === 'object') {
    if (!Array.isArray(value) && !ArrayBuffer.isView(value)) {
      throw new BadInputError('BAD_PARQUET_ROW', `row ${row}: column "${column.name}" must be a list`);
    }
    const items = Array.from(value as ArrayLike<unknown>);
    return type.list === 'INT64' ? items.map((item) => BigInt(item as number)) : items;
  }
  return value;
}

let writerModule: typeof import('hyparquet-writer') | undefined;
let readerModule: typeof import('hyparquet') | undefined;

/** Encodes rows into a Parquet file (bytes). */
export function encodeParquet(
  columns: readonly ParquetColumn[],
  rows: readonly Record<string, unknown>[],
  options: ParquetEncodeOptions = {},
): Uint8Array {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  writerModule ??= require('hyparquet-writer') as typeof import('hyparquet-writer');
  const columnData = columns.map((column) => ({
    name: column.name,
    data: rows.map((row, index) => columnValue(column, row[column.name], index)),
  }));
  const buffer = writerModule.parquetWriteBuffer({
    columnData: columnData,
    schema: schemaOf(columns) as never,
    rowGroupSize: options.rowGroupSize ?? 10_000,
    statistics: false,
    createdBy: 'hat-pipeline',
    compressors: { SNAPPY: snappyCompress },
    kvMetadata: Object.entries(options.metadata ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, value]) => ({ key, value })),
  });
  return new Uint8Array(buffer);
}

/** Decodes every row of a Parquet file; INT64 values come back as bigint. */
export async function decodeParquet(bytes: Uint8Array): Promise<Record<string, unknown>[]> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  readerModule ??= require('hyparquet') as typeof import('hyparquet');
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return (await readerModule.parquetReadObjects({ file })) as Record<string, unknown>[];
}

/** The footer's key-value metadata. */
export async function parquetMetadataOf(bytes: Uint8Array): Promise<Record<string, string>> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  readerModule ??= require('hyparquet') as typeof import('hyparquet');
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const metadata = readerModule.parquetMetadata(file);
  return Object.fromEntries((metadata.key_value_metadata ?? []).map((entry) => [entry.key, entry.value ?? '']));
}

/** Writes rows as one Parquet object (atomic put); returns its info with sha256 and record count. */
export async function writeParquet(
  store: ArtifactStore,
  key: string,
  columns: readonly ParquetColumn[],
  rows: readonly Record<string, unknown>[],
  options: ParquetEncodeOptions = {},
): Promise<ObjectInfo & { sha256: string; records: number }> {
  const bytes = encodeParquet(columns, rows, options);
  const info = await store.put(key, bytes, { contentType: 'application/vnd.apache.parquet' });
  return { ...info, sha256: info.sha256 ?? sha256Hex(bytes), records: rows.length };
}

/** Reads a Parquet object from the store. */
export async function readParquet(store: ArtifactStore, key: string): Promise<Record<string, unknown>[]> {
  return decodeParquet(await store.getBuffer(key));
}

/**
 * A list column given flat: every row's values concatenated, and each row's length. Tokenized
 * shards hold millions of list values; handing them over flat skips building one JS array per row
 * and the writer's per-value level computation (Dremel), which dominate the row-wise path.
 */
export interface FlatListColumn {
  values: ArrayLike<unknown>;
  lengths: ArrayLike<number>;
}

/** Column data for encodeParquetColumns: one value per row, or a flat list column. */
export type ParquetColumnData = readonly unknown[] | FlatListColumn;

function isFlatList(data: ParquetColumnData): data is FlatListColumn {
  return !Array.isArray(data) && typeof (data as FlatListColumn).lengths === 'object';
}

interface PageData {
  values: unknown[] | ArrayLike<unknown>;
  definitionLevels: ArrayLike<number>;
  repetitionLevels: ArrayLike<number>;
  maxDefinitionLevel: number;
}

/** Definition and repetition levels of rows [start, end) of a flat list column, computed per row rather than per value. */
function flatListPage(
  column: ParquetColumn,
  data: FlatListColumn,
  rowStarts: number[],
  start: number,
  end: number,
): PageData {
  const elementType = (column.type as { list: string }).list;
  const valueStart = rowStarts[start];
  const valueEnd = rowStarts[end];
  let empty = 0;
  for (let row = start; row < end; row++) if (data.lengths[row] === 0) empty++;
  const count = valueEnd - valueStart + empty;
  const definitionLevels = new Uint8Array(count).fill(1);
  const repetitionLevels = new Uint8Array(count).fill(1);
  let values: unknown[] | ArrayLike<unknown>;
  if (empty === 0 && elementType !== 'INT64') {
    values = ArrayBuffer.isView(data.values)
      ? (data.values as unknown as Int32Array).subarray(valueStart, valueEnd)
      : Array.prototype.slice.call(data.values, valueStart, valueEnd);
    let position = 0;
    for (let row = start; row < end; row++) {
      repetitionLevels[position] = 0;
      position += data.lengths[row];
    }
  } else {
    const list: unknown[] = new Array(count);
    let position = 0;
    for (let row = start; row < end; row++) {
      const length = data.lengths[row];
      if (length === 0) {
        // An empty list is one slot with definition level 0, as Dremel writes it.
        list[position] = undefined;
        definitionLevels[position] = 0;
        repetitionLevels[position++] = 0;
        continue;
      }
      for (let index = 0; index < length; index++) {
        const value = data.values[rowStarts[row] + index];
        list[position] = elementType === 'INT64' ? BigInt(value as number) : value;
        repetitionLevels[position++] = index === 0 ? 0 : 1;
      }
    }
    values = list;
  }
  return { values, definitionLevels, repetitionLevels, maxDefinitionLevel: 1 };
}

function rowPage(column: ParquetColumn, data: readonly unknown[], start: number, end: number): PageData {
  if (typeof column.type === 'object') {
    const lengths = data.slice(start, end).map((value, offset) => {
      if (!Array.isArray(value) && !ArrayBuffer.isView(value))
        throw new BadInputError('BAD_PARQUET_ROW', `row ${start + offset}: column "${column.name}" must be a list`);
      return (value as ArrayLike<unknown>).length;
    });
    const values = data.slice(start, end).flatMap((value) => Array.from(value as ArrayLike<unknown>));
    return flatListPage(
      column,
      { values, lengths },
      lengths.reduce((starts, length) => (starts.push(starts.at(-1)! + length), starts), [0]),
      0,
      lengths.length,
    );
  }
  const values = data.slice(start, end).map((value, offset) => columnValue(column, value, start + offset));
  return {
    values,
    definitionLevels: column.nullable ? values.map((value) => (value === null ? 0 : 1)) : [],
    repetitionLevels: [],
    maxDefinitionLevel: column.nullable ? 1 : 0,
  };
}

/**
 * Encodes columns (not rows) into a Parquet file: the same schema, layout and footer metadata as
 * encodeParquet, several times faster for large list columns given as FlatListColumn. Scalar
 * and list columns given per row are accepted too.
 */
export function encodeParquetColumns(
  columns: readonly ParquetColumn[],
  data: Readonly<Record<string, ParquetColumnData>>,
  options: ParquetEncodeOptions = {},
): Uint8Array {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  writerModule ??= require('hyparquet-writer') as typeof import('hyparquet-writer');
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  const { writeColumn } = require('hyparquet-writer/src/column.js') as typeof import('hyparquet-writer/src/column.js');
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- ESM-only package, loaded lazily through require(esm)
  const datapage = require('hyparquet-writer/src/datapage.js') as typeof import('hyparquet-writer/src/datapage.js');
  const rowCounts = columns.map((column) => {
    const values = data[column.name];
    if (values === undefined) throw new BadInputError('BAD_PARQUET_ROW', `column "${column.name}" has no data`);
    if (isFlatList(values) && typeof column.type !== 'object')
      throw new BadInputError(
        'BAD_PARQUET_ROW',
        `column "${column.name}" is not a list column but was given flat list data`,
      );
    return isFlatList(values) ? values.lengths.length : values.length;
  });
  const rowCount = rowCounts[0] ?? 0;
  if (rowCounts.some((count) => count !== rowCount))
    throw new BadInputError('BAD_PARQUET_ROW', `columns have different row counts (${rowCounts.join(', ')})`);
  const schema = schemaOf(columns);
  // Sized for the flat int32 columns (packed shards compress to about a tenth; a larger file still
  // grows by doubling), so a shard's file is not copied through a dozen doublings from 1 KiB.
  let estimate = 1 << 20;
  for (const column of columns) {
    const values = data[column.name];
    if (values !== undefined && isFlatList(values) && ArrayBuffer.isView(values.values))
      estimate += Math.ceil((values.values as Int32Array).byteLength / 4);
  }
  const byteWriter = new writerModule.ByteWriter(estimate);
  const writer = new writerModule.ParquetWriter({
    writer: byteWriter,
    schema: schema as never,
    statistics: false,
    createdBy: 'hat-pipeline',
    compressors: { SNAPPY: snappyCompress },
    kvMetadata: Object.entries(options.metadata ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, value]) => ({ key, value })),
  });
  // Schema elements of each column, root to leaf (one element for scalars, three for lists).
  const paths: Array<Record<string, unknown>[]> = [];
  let position = 1;
  for (const column of columns) {
    const width = typeof column.type === 'object' ? 3 : 1;
    paths.push([schema[0], ...schema.slice(position, position + width)]);
    position += width;
  }
  const rowStarts = columns.map((column) => {
    const values = data[column.name];
    if (!isFlatList(values)) return [];
    const starts = new Array<number>(values.lengths.length + 1);
    starts[0] = 0;
    for (let row = 0; row < values.lengths.length; row++) starts[row + 1] = starts[row] + values.lengths[row];
    return starts;
  });
  const groupSize = options.rowGroupSize ?? 10_000;
  for (let start = 0; start < rowCount; start += groupSize) {
    const end = Math.min(rowCount, start + groupSize);
    const groupOffset = byteWriter.offset;
    const chunks = columns.map((column, index) => {
      const values = data[column.name];
      const path = paths[index];
      if (
        isFlatList(values) &&
        typeof column.type === 'object' &&
        column.type.list === 'INT32' &&
        fitsInt32ListChunk(values.values, values.lengths, start, end)
      ) {
        const result = writeInt32ListChunk({
          writer: byteWriter,
          writePageHeader: datapage.writePageHeader as never,
          pathInSchema: path.slice(1).map((element) => element.name as string),
          values: values.values,
          rowStarts: rowStarts[index],
          start,
          end,
        });
        writer.pendingIndexes.push(result);
        return result.chunk;
      }
      const pageData = isFlatList(values)
        ? flatListPage(column, values, rowStarts[index], start, end)
        : rowPage(column, values, start, end);
      const result = writeColumn({
        writer: byteWriter,
        column: {
          columnName: path
            .slice(1)
            .map((element) => element.name)
            .join('.'),
          element: path.at(-1) as never,
          schemaPath: path as never,
          codec: 'SNAPPY',
          compressors: writer.compressors,
          stats: false,
          // One page per column chunk: row groups are already small, and page splitting inspects every value.
          pageSize: 0,
          columnIndex: false,
          offsetIndex: true,
          // Plain integers: a dictionary over millions of token ids costs more time than it saves bytes.
          encoding:
            typeof column.type === 'object' && column.type.list !== 'STRING' && column.type.list !== 'BOOLEAN'
              ? 'PLAIN'
              : undefined,
        },
        pageData: pageData as never,
      });
      writer.pendingIndexes.push(result);
      return result.chunk;
    });
    let totalBytes = 0n;
    for (const chunk of chunks) totalBytes += chunk.meta_data?.total_uncompressed_size ?? 0n;
    writer.row_groups.push({
      columns: chunks,
      total_byte_size: totalBytes,
      num_rows: BigInt(end - start),
      total_compressed_size: BigInt(byteWriter.offset - groupOffset),
    });
    writer.num_rows += BigInt(end - start);
  }
  void writer.finish();
  return byteWriter.getBytes();
}
