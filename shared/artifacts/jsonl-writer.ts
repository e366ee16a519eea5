import { pipeline } from 'node:stream';
import { constants, createGzip, type Gzip, type ZlibOptions } from 'node:zlib';
import type { z } from 'zod';
import { ValidationError } from '../errors';
import { zodProblems } from '../config/zod-problems';
import type { ArtifactStore, ObjectInfo } from './artifact-store';
import { ByteMeter } from './byte-meter';

/**
 * Gzip settings of every JSONL artifact. Fixed so the same records always give the same bytes
 * (Node's gzip header carries no file name and a zero mtime).
 */
export const jsonlGzipOptions: Readonly<ZlibOptions> = Object.freeze({
  level: 6,
  memLevel: 8,
  windowBits: 15,
  strategy: constants.Z_DEFAULT_STRATEGY,
  chunk: 64 * 1024,
});

const newline = Buffer.from('\n');

/** Size of the pooled batch buffers writeJsonBytes copies into. */
const batchBytes = 256 * 1024;
/** Batch buffers gzip has finished reading, shared by the writers of this thread. */
const batchPool: Buffer[] = [];
const batchPoolLimit = 64;

function returnBatch(chunk: Uint8Array): void {
  if (batchPool.length < batchPoolLimit) batchPool.push(Buffer.from(chunk.buffer, 0, batchBytes));
}

/** Lines are handed to gzip in batches of about this many characters: one call per line is slow. */
const batchCharacters = 64 * 1024;

/**
 * How far the encoder may run ahead of gzip (Node's thread pool) before `write` waits. With the
 * stream's default (16 KiB) every batch waited for its own compression, so JSON encoding and
 * compression took turns instead of using two cores; how input reaches deflate does not change
 * its output bytes.
 */
const gzipAhead = 4 * 1024 * 1024;

/** What a JSONL write produced: the stored object plus its record count. */
export interface JsonlWriteResult extends ObjectInfo {
  /** Hex sha256 of the stored (compressed) bytes. */
  sha256: string;
  /** Records written (one per line). */
  records: number;
  /** Bytes of JSON text before compression. */
  uncompressedBytes: number;
}

export interface JsonlWriterOptions<T> {
  /** Checked against every record before it is written; a mismatch aborts the object. */
  schema?: z.ZodType<T>;
  /**
   * Gzip level instead of jsonlGzipOptions' 6: 1 for scratch files a later job reads once
   * (several times faster to write, still deterministic). Published artifacts keep 6.
   */
  level?: number;
  /**
   * Writes a record's JSON text instead of JSON.stringify (after the schema check): trajectories
   * write their tool schemas keeping floats (`1.0`), which JSON.stringify cannot.
   */
  stringify?: (record: T) => string;
}

/**
 * The error for a record that does not match its schema: every problem names the URI, the line
 * (1-based record number) and the field path, e.g. `s3://b/x.jsonl.gz: line 17: messages[2].role: ...`.
 */
export function recordSchemaError(
  uri: string,
  lineNumber: number,
  error: z.ZodError,
  direction: 'read' | 'write',
): ValidationError {
  const problems = zodProblems(error, uri).map((problem) => ({ ...problem, line: lineNumber }));
  const summary =
    direction === 'read'
      ? `line ${lineNumber} of ${uri} does not match its schema; fix the data or the stage that wrote it`
      : `record ${lineNumber} written to ${uri} does not match its schema; nothing was published, fix the code that produced it`;
  return new ValidationError('BAD_RECORD', summary, problems);
}

/**
 * Streams records to the store as gzip-compressed JSON Lines. Nothing is published under the key
 * until `close()` succeeds; a schema mismatch, an `abort()` or a store failure leaves no object.
 */
export class JsonlWriter<T = unknown> {
  private readonly gzip: Gzip;
  private readonly meter = new ByteMeter();
  private readonly putting: Promise<ObjectInfo>;
  private readonly schema?: z.ZodType<T>;
  private readonly stringify: (record: T) => string;
  private pending = '';
  /** Records given as bytes (writeJsonBytes), after the text in `pending` that preceded them. */
  private pendingBytes: Uint8Array[] = [];
  private pendingByteCount = 0;
  /** The pooled batch being filled by writeJsonBytes, and how much of it is. */
  private batch?: Buffer;
  private batchUsed = 0;
  /** Underlying buffers of batches from the pool, returned to it when gzip has read them. */
  private readonly pooled = new WeakSet<ArrayBufferLike>();
  private records = 0;
  private uncompressedBytes = 0;
  private failed?: unknown;
  private closed = false;
  /** URI of the object being written. */
  readonly uri: string;

  private constructor(
    store: ArtifactStore,
    readonly key: string,
    options: JsonlWriterOptions<T>,
  ) {
    this.uri = store.uriOf(key);
    this.schema = options.schema;
    this.stringify = options.stringify ?? JSON.stringify;
    this.gzip = createGzip({
      ...jsonlGzipOptions,
      ...(options.level !== undefined ? { level: options.level } : {}),
      writableHighWaterMark: gzipAhead,
    } as ZlibOptions);
    // Measured here rather than taken from the store, so any ArtifactStore gives size and digest.
    pipeline(this.gzip, this.meter, () => undefined);
    this.putting = store.put(key, this.meter, { contentType: 'application/gzip' });
    // The failure surfaces from write()/close(); this only keeps it from being "unhandled" meanwhile.
    this.putting.catch(() => undefined);
  }

  /** Starts the object; records follow with `write`, then `close` publishes it. */
  static open<T = unknown>(store: ArtifactStore, key: string, options: JsonlWriterOptions<T> = {}): JsonlWriter<T> {
    return new JsonlWriter<T>(store, key, options);
  }

  /** Number of records accepted so far. */
  get count(): number {
    return this.records;
  }

  /**
   * Writes one record given as the UTF-8 bytes of its JSON text, in pieces (concatenated, they
   * are one JSON value without a newline, as JSON.stringify writes it), for callers that pass
   * records on without parsing them; no schema check.
   */
  async writeJsonBytes(...pieces: Uint8Array[]): Promise<void> {
    if (this.closed) throw new Error(`JsonlWriter for ${this.uri} is closed`);
    if (this.failed !== undefined) throw this.failed;
    this.textToBytes();
    for (const piece of pieces) this.copyIntoBatch(piece);
    this.copyIntoBatch(newline);
    this.records += 1;
    if (this.pendingByteCount >= batchCharacters) await this.flush();
  }

  /**
   * Copies bytes into the current batch buffer, taken from a pool that gzip hands buffers back to
   * once it has read them: writers that pass gigabytes through (the shard exports) then allocate
   * a few buffers in all instead of one per batch, and V8 starts no collection for that memory.
   */
  private copyIntoBatch(bytes: Uint8Array): void {
    let offset = 0;
    while (offset < bytes.length) {
      if (this.batch === undefined) this.batch = batchPool.pop() ?? Buffer.allocUnsafe(batchBytes);
      const room = batchBytes - this.batchUsed;
      const count = Math.min(room, bytes.length - offset);
      this.batch.set(bytes.subarray(offset, offset + count), this.batchUsed);
      this.batchUsed += count;
      this.pendingByteCount += count;
      offset += count;
      if (this.batchUsed === batchBytes) this.sealBatch();
    }
  }

  private sealBatch(): void {
    if (this.batch === undefined || this.batchUsed === 0) return;
    this.pendingBytes.push(this.batch.subarray(0, this.batchUsed));
    this.pooled.add(this.batch.buffer);
    this.batch = undefined;
    this.batchUsed = 0;
  }

  /**
   * Writes one line given as text (no newline in it), for scratch files whose lines are not single
   * JSON values; no schema check.
   */
  async writeLine(text: string): Promise<void> {
    if (this.closed) throw new Error(`JsonlWriter for ${this.uri} is closed`);
    if (this.failed !== undefined) throw this.failed;
    this.pending += `${text}\n`;
    this.records += 1;
    if (this.pending.length >= batchCharacters) await this.flush();
  }

  async write(record: T): Promise<void> {
    if (this.closed) throw new Error(`JsonlWriter for ${this.uri} is closed`);
    if (this.failed !== undefined) throw this.failed;
    let value = record;
    if (this.schema) {
      const result = this.schema.safeParse(record);
      if (!result.success) {
        const error = recordSchemaError(this.uri, this.records + 1, result.error, 'write');
        await this.abort(error);
        throw error;
      }
      value = result.data;
    }
    this.pending += `${this.stringify(value)}\n`;
    this.records += 1;
    if (this.pending.length >= batchCharacters) await this.flush();
  }

  /** Writes what is buffered, finishes the object and publishes it under its key. */
  async close(): Promise<JsonlWriteResult> {
    if (this.failed !== undefined) throw this.failed;
    if (this.closed) throw new Error(`JsonlWriter for ${this.uri} is already closed`);
    await this.flush();
    this.closed = true;
    this.gzip.end();
    let info: ObjectInfo;
    try {
      info = await this.putting;
    } catch (error) {
      this.failed = error;
      throw error;
    }
    return {
      ...info,
      bytes: this.meter.bytes,
      sha256: this.meter.sha256(),
      records: this.records,
      uncompressedBytes: this.uncompressedBytes,
    };
  }

  /** Gives up: the partial object is discarded and nothing appears under the key. */
  async abort(reason: unknown = new Error('aborted')): Promise<void> {
    if (this.failed !== undefined) return;
    this.failed = reason;
    this.closed = true;
    this.gzip.destroy(reason instanceof Error ? reason : new Error(String(reason)));
    await this.putting.catch(() => undefined);
  }

  /** Moves buffered text into the byte pieces, so records keep their order when both kinds are written. */
  private textToBytes(): void {
    if (this.pending === '') return;
    // Bytes copied into the current batch came before this text.
    this.sealBatch();
    const bytes = Buffer.from(this.pending, 'utf8');
    this.pending = '';
    this.pendingBytes.push(bytes);
    this.pendingByteCount += bytes.length;
  }

  private async flush(): Promise<void> {
    if (this.pending === '' && this.pendingByteCount === 0) return;
    // Encoded once: measuring the string's UTF-8 length and then handing gzip the string encoded it twice.
    this.textToBytes();
    this.sealBatch();
    const chunks = this.pendingBytes;
    this.pending = '';
    this.pendingBytes = [];
    this.pendingByteCount = 0;
    let writable = true;
    for (const chunk of chunks) {
      this.uncompressedBytes += chunk.length;
      const pooled = this.pooled.has(chunk.buffer);
      // Deflate's output does not depend on how its input is cut into writes.
      writable = this.gzip.write(chunk, pooled ? () => returnBatch(chunk) : undefined);
    }
    if (writable) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.gzip.off('drain', done);
        this.gzip.off('close', done);
        resolve();
      };
      this.gzip.on('drain', done);
      this.gzip.on('close', done);
    });
    if (this.gzip.destroyed) {
      // The store stopped reading (upload failed): report its error, not a stuck stream.
      this.failed = await this.putting.then(
        () => new Error(`store stopped reading ${this.uri}`),
        (error: unknown) => error,
      );
      throw this.failed;
    }
  }
}

/** Writes all records as one gzip JSONL object and publishes it; see JsonlWriter. */
export async function writeJsonl<T>(
  store: ArtifactStore,
  key: string,
  records: Iterable<T> | AsyncIterable<T>,
  options: JsonlWriterOptions<T> = {},
): Promise<JsonlWriteResult> {
  const writer = JsonlWriter.open<T>(store, key, options);
  try {
    for await (const record of records) await writer.write(record);
  } catch (error) {
    await writer.abort(error);
    throw error;
  }
  return writer.close();
}
