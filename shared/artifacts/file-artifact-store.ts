import { createHash, randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { hostname } from 'node:os';
import { BadInputError } from '../errors';
import { diagnoseMissingDirectory, fileStorageError } from './storage-errors';
import { sha256Hex } from '../hash/hash';
import { artifactNotFound } from './artifact-errors';
import type { ArtifactStore, ObjectInfo, PutOptions } from './artifact-store';
import { parseArtifactUri } from './artifact-uri';
import { compareKeys, temporarySegmentPrefix, validateKeyPrefix, validateObjectKey } from './object-key';

const writeBatchBytes = 1024 * 1024;

function hasCode(error: unknown, ...codes: string[]): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && codes.includes(code);
}

/** A file system cannot hold both `a` and `a/b`, which S3 can: say so instead of a raw ENOTDIR. */
function keyConflict(uri: string, cause: unknown): BadInputError {
  return new BadInputError(
    'KEY_CONFLICT',
    `cannot write ${uri}: a file store cannot hold both a key and keys below it ("a" and "a/b"); choose keys that do not nest under each other`,
    { cause },
  );
}

/** This machine in temp file names, so a sweep can tell its own dead writers from another host's. */
const hostTag = createHash('sha256').update(hostname()).digest('hex').slice(0, 8);
/** Temp files of another host (a shared volume) are swept only when this old: their writer cannot be asked. */
const foreignTemporaryAgeMs = 60 * 60_000;

/** Whether a process of this machine is gone (a killed worker's temp file is garbage). */
function isDead(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return hasCode(error, 'ESRCH');
  }
}

/** Whether a directory entry name could be a key segment (files others dropped there may not be). */
function isListableName(name: string): boolean {
  return !name.startsWith(temporarySegmentPrefix) && !/[\u0000-\u001f\u007f\\]/.test(name);
}

/**
 * Artifacts in a local directory (`file:///abs/dir`): single machine, tests, `hat stage`.
 * A put writes a temp file beside the final one, fsyncs it, and renames it into place, so the
 * final name only ever holds complete objects (rename is atomic within one directory).
 */
export class FileArtifactStore implements ArtifactStore {
  readonly rootUri: string;
  /** Absolute directory holding the objects. */
  readonly rootDirectory: string;

  constructor(rootDirectory: string) {
    if (!isAbsolute(rootDirectory)) {
      throw new BadInputError(
        'BAD_ARTIFACT_URI',
        `file store root ${JSON.stringify(rootDirectory)} is not an absolute path; use file:///absolute/path`,
      );
    }
    this.rootDirectory = resolve(rootDirectory);
    this.rootUri = pathToFileURL(this.rootDirectory).href;
  }

  uriOf(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  keyOf(uri: string): string {
    const location = parseArtifactUri(uri);
    const path = location.scheme === 'file' ? relative(this.rootDirectory, location.path) : undefined;
    if (path === undefined || path === '' || path === '..' || path.startsWith(`..${sep}`) || isAbsolute(path)) {
      throw new BadInputError('URI_OUTSIDE_STORE', `${uri} is not an object under ${this.rootUri}`);
    }
    return validateObjectKey(path.split(sep).join('/'));
  }

  async put(key: string, body: string | Uint8Array | Readable, options: PutOptions = {}): Promise<ObjectInfo> {
    try {
      return await this.putUnchecked(key, body, options);
    } catch (error) {
      throw fileStorageError(error, 'put', this.uriOf(key)) ?? error;
    }
  }

  private async putUnchecked(
    key: string,
    body: string | Uint8Array | Readable,
    _options: PutOptions,
  ): Promise<ObjectInfo> {
    const path = this.pathOf(key);
    // A source that fails while the directory is being made must not crash the process as an
    // unhandled 'error': the failure is read from the stream when writing starts.
    if (typeof body === 'object' && 'on' in body) body.on('error', () => undefined);
    const directory = dirname(path);
    try {
      await mkdir(directory, { recursive: true });
    } catch (error) {
      if (hasCode(error, 'EEXIST', 'ENOTDIR')) throw keyConflict(this.uriOf(key), error);
      if (hasCode(error, 'ENOENT')) throw await diagnoseMissingDirectory(path, 'put', this.uriOf(key), error);
      throw error;
    }
    const temporaryPath = join(
      directory,
      `${temporarySegmentPrefix}${hostTag}-${process.pid}-${randomBytes(8).toString('hex')}`,
    );
    const handle = await open(temporaryPath, 'wx');
    let written: { bytes: number; sha256: string };
    try {
      written = await this.writeBody(handle, body);
      await handle.sync();
    } catch (error) {
      await handle.close().catch(() => undefined);
      await unlink(temporaryPath).catch(() => undefined);
      throw error;
    }
    await handle.close();
    try {
      await rename(temporaryPath, path);
    } catch (error) {
      await unlink(temporaryPath).catch(() => undefined);
      throw hasCode(error, 'EISDIR', 'ENOTEMPTY', 'EEXIST') ? keyConflict(this.uriOf(key), error) : error;
    }
    await syncDirectory(directory);
    const info = await stat(path);
    return { key, uri: this.uriOf(key), bytes: written.bytes, sha256: written.sha256, lastModified: info.mtime };
  }

  async getStream(key: string): Promise<Readable> {
    const path = this.pathOf(key);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      throw this.mapReadError(error, key);
    }
    if (!(await handle.stat()).isFile()) {
      await handle.close();
      throw artifactNotFound(this.uriOf(key));
    }
    return handle.createReadStream({ highWaterMark: 256 * 1024 });
  }

  async getBuffer(key: string): Promise<Buffer> {
    try {
      return await readFile(this.pathOf(key));
    } catch (error) {
      throw this.mapReadError(error, key);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const info = await stat(this.pathOf(key));
      return info.isFile() ? { key, uri: this.uriOf(key), bytes: info.size, lastModified: info.mtime } : undefined;
    } catch (error) {
      if (hasCode(error, 'ENOENT', 'ENOTDIR')) return undefined;
      throw fileStorageError(error, 'head', this.uriOf(key)) ?? error;
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    validateKeyPrefix(prefix);
    const directoryKey = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    yield* this.walk(join(this.rootDirectory, directoryKey), directoryKey, prefix);
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.pathOf(key));
    } catch (error) {
      // Deleting what is not there succeeds, as on S3, so retried cleanups stay idempotent.
      if (!hasCode(error, 'ENOENT', 'ENOTDIR')) throw fileStorageError(error, 'delete', this.uriOf(key)) ?? error;
    }
  }

  /**
   * Removes temp files that a killed writer left in the directory of `prefix`: those of a process
   * of this machine that no longer runs, and those of another host older than an hour. Live
   * writers' temp files are left alone. Returns how many were removed.
   */
  async sweepTemporary(prefix: string): Promise<number> {
    validateKeyPrefix(prefix);
    const directory = join(this.rootDirectory, prefix.slice(0, prefix.lastIndexOf('/') + 1));
    let names: string[];
    try {
      names = await readdir(directory);
    } catch {
      return 0;
    }
    let removed = 0;
    for (const name of names) {
      if (!name.startsWith(temporarySegmentPrefix)) continue;
      const [host, pid] = name.slice(temporarySegmentPrefix.length).split('-');
      const path = join(directory, name);
      const stale =
        host === hostTag && pid !== undefined && /^\d+$/.test(pid)
          ? isDead(Number(pid))
          : Date.now() - ((await stat(path).catch(() => undefined))?.mtimeMs ?? Date.now()) > foreignTemporaryAgeMs;
      if (
        stale &&
        (await unlink(path).then(
          () => true,
          () => false,
        ))
      )
        removed += 1;
    }
    return removed;
  }

  async close(): Promise<void> {}

  private pathOf(key: string): string {
    return join(this.rootDirectory, validateObjectKey(key));
  }

  private async writeBody(
    handle: FileHandle,
    body: string | Uint8Array | Readable,
  ): Promise<{ bytes: number; sha256: string }> {
    if (typeof body === 'string' || ArrayBuffer.isView(body)) {
      const data = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      await handle.writeFile(data);
      return { bytes: data.byteLength, sha256: sha256Hex(data) };
    }
    // Written by hand rather than through a WriteStream so the handle stays open for fsync, and
    // chunks are gathered so a stream of small chunks costs few write calls.
    const hash = createHash('sha256');
    let bytes = 0;
    let batch: Buffer[] = [];
    let batchBytes = 0;
    for await (const chunk of body) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : (chunk as Buffer);
      hash.update(buffer);
      bytes += buffer.length;
      batch.push(buffer);
      batchBytes += buffer.length;
      if (batchBytes >= writeBatchBytes) {
        await handle.writev(batch);
        batch = [];
        batchBytes = 0;
      }
    }
    if (batch.length > 0) await handle.writev(batch);
    return { bytes, sha256: hash.digest('hex') };
  }

  private mapReadError(error: unknown, key: string): unknown {
    return hasCode(error, 'ENOENT', 'ENOTDIR', 'EISDIR')
      ? artifactNotFound(this.uriOf(key), error)
      : (fileStorageError(error, 'get', this.uriOf(key)) ?? error);
  }

  /**
   * Yields the files under a directory in S3 key order. A directory sorts as its name plus "/",
   * which places all of its keys exactly where a flat sorted listing would.
   */
  private async *walk(directory: string, directoryKey: string, prefix: string): AsyncGenerator<ObjectInfo> {
    let entries: Dirent[];
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch (error) {
      if (hasCode(error, 'ENOENT', 'ENOTDIR')) return;
      throw error;
    }
    const candidates: Array<{ sortKey: string; name: string; isDirectory: boolean }> = [];
    for (const entry of entries) {
      if (!isListableName(entry.name)) continue;
      if (entry.isDirectory()) {
        const sortKey = `${directoryKey}${entry.name}/`;
        if (sortKey.startsWith(prefix) || prefix.startsWith(sortKey))
          candidates.push({ sortKey, name: entry.name, isDirectory: true });
      } else if (entry.isFile()) {
        const sortKey = `${directoryKey}${entry.name}`;
        if (sortKey.startsWith(prefix)) candidates.push({ sortKey, name: entry.name, isDirectory: false });
      }
    }
    candidates.sort((left, right) => compareKeys(left.sortKey, right.sortKey));
    for (const candidate of candidates) {
      const path = join(directory, candidate.name);
      if (candidate.isDirectory) {
        yield* this.walk(path, candidate.sortKey, prefix);
        continue;
      }
      let info;
      try {
        info = await stat(path);
      } catch (error) {
        // Deleted between readdir and stat: it is simply no longer there.
        if (hasCode(error, 'ENOENT')) continue;
        throw error;
      }
      yield { key: candidate.sortKey, uri: pathToFileURL(path).href, bytes: info.size, lastModified: info.mtime };
    }
  }
}

/** Makes a rename durable: fsync of the directory entry. Some platforms cannot open directories. */
async function syncDirectory(directory: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(directory, 'r');
    await handle.sync();
  } catch (error) {
    if (!hasCode(error, 'EISDIR', 'EPERM', 'EINVAL', 'EACCES')) throw error;
  } finally {
    await handle?.close();
  }
}
