import { gunzipSync } from 'node:zlib';
import type { z } from 'zod';
import type { StageDeps } from './define-stage';
import { isGzipKey } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { parseRecord } from '../../shared/artifacts/record-fields';
import { checkRecordSizes } from '../../shared/artifacts/record-limit';
import { checkUtf8 } from '../../shared/artifacts/utf8';
import { BadInputError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import { mayHoldPythonNumbers, parseJsonKeepingFloats } from '../../shared/text/python-values';

/** An input object to read records from; `records` and `sha256` are known when a manifest listed it. */
export interface InputObject {
  uri: string;
  records?: number;
  sha256?: string;
}

const jsonlKey = /\.jsonl(\.gz)?$/;

/** Whether a URI names a stage manifest (whose listed objects are the input). */
export function isManifestUri(uri: string): boolean {
  return uri.endsWith('/manifest.json') || uri === 'manifest.json';
}

/**
 * Input URIs with stage manifests (`.../manifest.json`) replaced by the JSONL objects of `kind`
 * they list, in order (an object without a kind is its stage's main records, here trajectories).
 */
export async function expandInputs(
  uris: readonly string[],
  openObject: StageDeps['openObject'],
  field: string,
  kind: 'trajectories' | 'tasks' | 'relabel',
): Promise<InputObject[]> {
  const objects: InputObject[] = [];
  for (const uri of uris) {
    const { store, key } = openObject(uri);
    if (!(await store.head(key)))
      throw new BadInputError(
        'MISSING_INPUT',
        `${field}: ${uri} does not exist; check the URI or run the stage that writes it`,
      );
    if (isManifestUri(uri)) {
      const manifest = await readManifest(store, key);
      const listed = manifest.objects.filter(
        (object) => jsonlKey.test(object.key) && (object.kind ?? 'trajectories') === kind,
      );
      if (listed.length === 0)
        throw new BadInputError(
          'MISSING_INPUT',
          `${field}: manifest ${uri} lists no JSONL objects of ${kind}; point ${field} at the objects or a manifest that lists them`,
        );
      for (const object of listed)
        objects.push({
          uri: object.uri,
          ...(object.records === undefined ? {} : { records: object.records }),
          sha256: object.sha256,
        });
    } else {
      objects.push({ uri });
    }
  }
  return objects;
}

/**
 * The records `[start, end)` of a JSONL object (gunzipped when `.gz`), each checked against the
 * schema, and the sha256 of the stored bytes (lineage). A record that does not match names the
 * URI, line and field.
 *
 * `listedSha256`: the sha256 a stage manifest lists for the object. When the stored bytes have
 * it, they are the bytes that stage wrote, and stages write records through their schema
 * (JsonlWriter's `schema`: each record is the schema's own output), so the records are parsed
 * without being checked again; checking 11 KB tasks and long trajectories record by record was a
 * large share of augment's and shard's time. Any other bytes are checked as before.
 *
 * `options.keepFloatsIn`: top-level fields read keeping float-ness (parseJsonKeepingFloats), for
 * values a chat template prints: the shard reads `tools` so, and a schema's `"minimum": 1.0`
 * renders `1.0` as Python does, not `1`.
 */
export async function readRecordRange<T>(
  openObject: StageDeps['openObject'],
  uri: string,
  schema: z.ZodType<T>,
  start = 0,
  end?: number,
  listedSha256?: string,
  options: { keepFloatsIn?: readonly string[] } = {},
): Promise<{ records: T[]; sha256: string }> {
  const { lines, sha256 } = await readJsonlLines(openObject, uri);
  const checked = listedSha256 === undefined || listedSha256 !== sha256 ? schema : undefined;
  const records: T[] = [];
  let index = 0;
  for (const [lineIndex, line] of lines.entries()) {
    if (line.trim() === '') continue;
    if (end !== undefined && index >= end) break;
    if (index++ < start) continue;
    records.push(parseRecordLine(uri, lineIndex, line, checked, options.keepFloatsIn));
  }
  return { records, sha256 };
}

/** The lines of a JSONL object (gunzipped when `.gz`) and the sha256 of the stored bytes. */
export async function readJsonlLines(
  openObject: StageDeps['openObject'],
  uri: string,
): Promise<{ lines: string[]; sha256: string }> {
  const { bytes, sha256 } = await readJsonlBytes(openObject, uri);
  return { lines: bytes.toString('utf8').split('\n'), sha256 };
}

/**
 * A JSONL object's text as bytes (gunzipped when its key ends in .gz) and the sha256 of the stored
 * bytes; `BAD_ENCODING` for bytes that are not UTF-8, `RECORD_TOO_LARGE` for a line over the limit.
 */
export async function readJsonlBytes(
  openObject: StageDeps['openObject'],
  uri: string,
): Promise<{ bytes: Buffer; sha256: string }> {
  const { store, key } = openObject(uri);
  const stored = await store.getBuffer(key);
  let bytes: Buffer;
  try {
    bytes = isGzipKey(key) ? gunzipSync(stored) : stored;
  } catch (error) {
    throw new BadInputError(
      'BAD_JSONL',
      `${uri}: not valid gzip data (${(error as Error).message}); is it a .gz file?`,
      { cause: error },
    );
  }
  // Bytes that are not UTF-8 are refused, never replaced by U+FFFD when lines are decoded.
  checkUtf8(bytes, uri);
  checkRecordSizes(bytes, uri);
  return { bytes, sha256: sha256Hex(stored) };
}

/**
 * One JSONL line (0-based `lineIndex`) parsed and checked against the schema (when given: none for
 * bytes a manifest vouches for, see readRecordRange); errors name the URI, line and field, and a
 * field the schema does not declare is refused (`UNKNOWN_FIELD`, see parseRecord). The
 * top-level fields named in `keepFloatsIn` keep float-ness (see readRecordRange).
 */
export function parseRecordLine<T>(
  uri: string,
  lineIndex: number,
  line: string,
  schema?: z.ZodType<T>,
  keepFloatsIn?: readonly string[],
): T {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    throw new BadInputError(
      'BAD_JSONL',
      `${uri}: line ${lineIndex + 1}: not valid JSON (${(error as Error).message}); each line must hold one JSON value`,
    );
  }
  if (keepFloatsIn?.length && value !== null && typeof value === 'object' && mayHoldPythonNumbers(line)) {
    // Parsed again only when the line may hold such a literal; the rest of the record stays JSON.parse's.
    const floats = parseJsonKeepingFloats(line) as Record<string, unknown>;
    for (const field of keepFloatsIn)
      if (Object.hasOwn(value, field)) (value as Record<string, unknown>)[field] = floats[field];
  }
  return schema === undefined ? (value as T) : parseRecord(schema, value, uri, lineIndex + 1);
}

/** Every record of the objects, keyed by `keyOf`, keeping only the keys `wanted` holds (when given), and the sha256 of each object read. */
export async function readKeyedRecords<T>(
  objects: readonly InputObject[],
  openObject: StageDeps['openObject'],
  schema: z.ZodType<T>,
  keyOf: (record: T) => string,
  wanted?: ReadonlySet<string>,
): Promise<{ records: Map<string, T>; objects: Array<{ uri: string; sha256: string }> }> {
  const found = new Map<string, T>();
  const read: Array<{ uri: string; sha256: string }> = [];
  for (const object of objects) {
    const { records, sha256 } = await readRecordRange(openObject, object.uri, schema);
    read.push({ uri: object.uri, sha256 });
    for (const record of records) {
      const id = keyOf(record);
      if (wanted === undefined || wanted.has(id)) found.set(id, record);
    }
  }
  return { records: found, objects: read };
}
