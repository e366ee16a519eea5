import { isUtf8 } from 'node:buffer';
import { pipeline, Transform } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { badEncodingError, firstInvalidUtf8Byte } from './utf8';
import type { z } from 'zod';
import { BadInputError } from '../errors';
import type { ArtifactStore } from './artifact-store';
import { parseRecord } from './record-fields';
import { largestRecordBytes, recordTooLarge } from './record-limit';

export interface JsonlReadOptions<T> {
  /**
   * Checked against every record; the first mismatch throws `BAD_RECORD` naming line and field, a
   * field the schema does not declare `UNKNOWN_FIELD` (see parseRecord).
   */
  schema?: z.ZodType<T>;
}

/** Whether a key holds gzip data, by its name (`.gz`). */
export function isGzipKey(key: string): boolean {
  return key.endsWith('.gz');
}

/**
 * Streams the records of a JSON Lines object (gunzipped when the key ends in `.gz`), one parsed
 * record at a time. Blank lines are skipped; line numbers count them, so they match an editor's.
 */
export function readJsonl<T = unknown>(
  store: ArtifactStore,
  key: string,
  options: JsonlReadOptions<T> = {},
): AsyncGenerator<T> {
  const uri = store.uriOf(key);
  const decode = strictLineDecoder(uri);
  return jsonlLines(store, key, (bytes, lineNumber) => {
    const text = decode(bytes, lineNumber);
    if (text.trim() === '') return undefined;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new BadInputError(
        'BAD_JSONL',
        `${uri}: line ${lineNumber}: not valid JSON (${(error as Error).message}); each line must hold one JSON value`,
      );
    }
    return options.schema ? parseRecord(options.schema, value, uri, lineNumber) : (value as T);
  });
}

/** One line of a JSONL object as text, with its 1-based line number. */
export interface JsonlTextLine {
  text: string;
  lineNumber: number;
}

export interface JsonlTextOptions {
  /** Sees every stored chunk (compressed, as stored) while the object streams: to hash it in the same read. */
  onStoredBytes?: (chunk: Buffer) => void;
}

/**
 * Every line of a JSONL object as text (gunzipped when `.gz`), blank ones included, decoded and
 * bounded as readJsonl decodes them (BAD_ENCODING, RECORD_TOO_LARGE): for readers that parse
 * lines themselves because a malformed line is reported and skipped, not fatal (production-log
 * import, recorded sessions). A byte that is not UTF-8 is still fatal: skipping the line would
 * hide it, and decoding it would change it.
 */
export function readJsonlTextLines(
  store: ArtifactStore,
  key: string,
  options: JsonlTextOptions = {},
): AsyncGenerator<JsonlTextLine> {
  const decode = strictLineDecoder(store.uriOf(key));
  return jsonlLines(store, key, (bytes, lineNumber) => ({ text: decode(bytes, lineNumber), lineNumber }), options);
}

/**
 * Decodes the lines of one object in order, refusing bytes that are not UTF-8 with their line and
 * byte offset instead of turning them into U+FFFD; a line's trailing CR is dropped (CRLF files).
 */
function strictLineDecoder(uri: string): (bytes: Buffer, lineNumber: number) => string {
  let lineStart = 0;
  return (bytes, lineNumber) => {
    const offset = lineStart;
    lineStart += bytes.length + 1;
    if (!isUtf8(bytes)) {
      const at = firstInvalidUtf8Byte(bytes);
      throw badEncodingError(uri, lineNumber, at, offset + at);
    }
    const decoded = bytes.toString('utf8');
    return decoded.endsWith('\r') ? decoded.slice(0, -1) : decoded;
  };
}

/**
 * The lines of a JSONL object as bytes, neither decoded nor parsed (empty lines skipped): for a
 * stage reading its own scratch files (written by JsonlWriter) to pass records on as they are.
 */
export function readJsonlLineBytes(store: ArtifactStore, key: string): AsyncGenerator<Buffer> {
  return jsonlLines(store, key, (bytes) => (bytes.length === 0 ? undefined : bytes));
}

/** Decompressed chunks this large: with zlib's 16 KiB default, reading was one thread-pool round trip per 16 KiB. */
const gunzipChunkBytes = 256 * 1024;

async function* jsonlLines<T>(
  store: ArtifactStore,
  key: string,
  convert: (bytes: Buffer, lineNumber: number) => T | undefined,
  options: JsonlTextOptions = {},
): AsyncGenerator<T> {
  const uri = store.uriOf(key);
  const source = await store.getStream(key);
  const gunzip = isGzipKey(key) ? createGunzip({ chunkSize: gunzipChunkBytes }) : undefined;
  const { onStoredBytes } = options;
  const stored = onStoredBytes
    ? pipeline(
        source,
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            onStoredBytes(chunk);
            done(null, chunk);
          },
        }),
        () => undefined,
      )
    : source;
  const stream = gunzip ? pipeline(stored, gunzip, () => undefined) : stored;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let lineNumber = 0;
  const largest = largestRecordBytes();
  const parse = (bytes: Buffer): T | undefined => {
    lineNumber += 1;
    if (bytes.length > largest) throw recordTooLarge(uri, lineNumber);
    return convert(bytes, lineNumber);
  };

  try {
    try {
      for await (const chunk of stream) {
        // Lines are split on bytes and decoded whole, so a character split across chunks is
        // never mistaken for a bad byte and a bad byte is never silently replaced.
        const bytes = chunk as Buffer;
        let start = 0;
        let newline = bytes.indexOf(10, start);
        while (newline !== -1) {
          const line =
            pending.length === 0
              ? bytes.subarray(start, newline)
              : Buffer.concat([...pending, bytes.subarray(start, newline)]);
          pending = [];
          pendingBytes = 0;
          const record = parse(line);
          if (record !== undefined) yield record;
          start = newline + 1;
          newline = bytes.indexOf(10, start);
        }
        if (start < bytes.length) {
          pending.push(bytes.subarray(start));
          pendingBytes += bytes.length - start;
          // A line still without its end is refused as soon as it is too long, not once it is whole.
          if (pendingBytes > largest) throw recordTooLarge(uri, lineNumber + 1);
        }
      }
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (gunzip && typeof code === 'string' && code.startsWith('Z_')) {
        throw new BadInputError(
          'BAD_JSONL',
          `${uri}: not valid gzip data (${(error as Error).message}); is it a .gz file?`,
          { cause: error },
        );
      }
      throw error;
    }
    const last = Buffer.concat(pending);
    const record = last.length === 0 ? undefined : parse(last);
    if (record !== undefined) yield record;
  } finally {
    source.destroy();
    if (stored !== source) stored.destroy();
    gunzip?.destroy();
  }
}

export { firstInvalidUtf8Byte } from './utf8';
