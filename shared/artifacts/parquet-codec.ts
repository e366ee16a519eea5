import type { ArtifactStore, ObjectInfo } from './artifact-store';
import { sha256Hex } from '../hash/hash';
import { BadInputError } from '../errors';

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
export function encodeParquet(columns: readonly ParquetColumn[], rows: readonly Record<string, unknown>[], options: ParquetEncodeOptions = {}): Uint8Array {
  writerModule ??= require('hyparquet-writer') as typeof import('hyparquet-writer');
  const columnData = columns.map((column) => ({
    name: column.name,
    data: rows.map((row, index) => columnValue(column, row[column.name], index)),
  }));
  const buffer = writerModule.parquetWriteBuffer({
    columnData: columnData as never,
    schema: schemaOf(columns) as never,
    rowGroupSize: options.rowGroupSize ?? 10_000,
    statistics: false,
    createdBy: 'hat-pipeline',
    kvMetadata: Object.entries(options.metadata ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, value]) => ({ key, value })),
  });
  return new Uint8Array(buffer);
}

/** Decodes every row of a Parquet file; INT64 values come back as bigint. */
export async function decodeParquet(bytes: Uint8Array): Promise<Record<string, unknown>[]> {
  readerModule ??= require('hyparquet') as typeof import('hyparquet');
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return (await readerModule.parquetReadObjects({ file })) as Record<string, unknown>[];
}

/** The footer's key-value metadata. */
export async function parquetMetadataOf(bytes: Uint8Array): Promise<Record<string, string>> {
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
