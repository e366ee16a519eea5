import type { Readable } from 'node:stream';

/** What the store knows about one object. */
export interface ObjectInfo {
  /** Full URI, e.g. `s3://bucket/prefix/runs/r1/collect/part-0000.jsonl.gz` or `file:///tmp/x/...`. */
  uri: string;
  /** Key relative to the store root. */
  key: string;
  bytes: number;
  lastModified?: Date;
  /** Hex sha256 of the stored bytes: set by `put` (computed while writing); head and list leave it out. */
  sha256?: string;
}

export interface PutOptions {
  contentType?: string;
}

/**
 * One interface over `s3://` and `file://` stores. Keys are relative to the store's root and are
 * validated (no `..`, no absolute paths, no empty segments). A put is atomic: the object is only
 * visible under its final key once it is complete (temp file + rename; S3 PUT/multipart
 * completion).
 */
export interface ArtifactStore {
  /** Root URI of the store (`s3://bucket/prefix` or `file:///abs/dir`), no trailing slash. */
  readonly rootUri: string;
  /** URI of a key under this store. */
  uriOf(key: string): string;
  /** Key of a URI under this store's root; throws BadInputError when the URI lies outside it. */
  keyOf(uri: string): string;
  put(key: string, body: string | Uint8Array | Readable, options?: PutOptions): Promise<ObjectInfo>;
  getStream(key: string): Promise<Readable>;
  getBuffer(key: string): Promise<Buffer>;
  /** undefined when the object does not exist. */
  head(key: string): Promise<ObjectInfo | undefined>;
  /** All objects whose key starts with the prefix, in key order. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  delete(key: string): Promise<void>;
  /**
   * Removes what killed writers left beside the keys of `prefix` (a file store's temp files);
   * stores whose writes leave nothing behind do not have it.
   */
  sweepTemporary?(prefix: string): Promise<number>;
  /** Releases clients and sockets. */
  close(): Promise<void>;
}
