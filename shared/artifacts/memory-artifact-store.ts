import { Readable } from 'node:stream';
import { BadInputError } from '../errors';
import { sha256Hex } from '../hash/hash';
import { artifactNotFound } from './artifact-errors';
import type { ArtifactStore, ObjectInfo } from './artifact-store';
import { compareKeys, validateKeyPrefix, validateObjectKey } from './object-key';

/**
 * An in-memory ArtifactStore for unit tests of code that uses a store (processors, codecs). Same
 * contract as the real ones: validated keys, key-ordered listing, and a streamed put that
 * publishes only once its stream has ended without error.
 */
export class MemoryArtifactStore implements ArtifactStore {
  readonly rootUri: string;
  private readonly objects = new Map<string, { data: Buffer; lastModified: Date }>();

  constructor(name = 'test') {
    this.rootUri = `memory://${name}`;
  }

  uriOf(key: string): string {
    return `${this.rootUri}/${validateObjectKey(key)}`;
  }

  keyOf(uri: string): string {
    if (!uri.startsWith(`${this.rootUri}/`))
      throw new BadInputError('URI_OUTSIDE_STORE', `${uri} is not an object under ${this.rootUri}`);
    return validateObjectKey(uri.slice(this.rootUri.length + 1));
  }

  async put(key: string, body: string | Uint8Array | Readable): Promise<ObjectInfo> {
    validateObjectKey(key);
    let data: Buffer;
    if (typeof body === 'string') data = Buffer.from(body, 'utf8');
    else if (ArrayBuffer.isView(body)) data = Buffer.from(body);
    else {
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
      data = Buffer.concat(chunks);
    }
    const lastModified = new Date();
    this.objects.set(key, { data, lastModified });
    return { key, uri: this.uriOf(key), bytes: data.byteLength, sha256: sha256Hex(data), lastModified };
  }

  async getStream(key: string): Promise<Readable> {
    return Readable.from([await this.getBuffer(key)]);
  }

  async getBuffer(key: string): Promise<Buffer> {
    const object = this.objects.get(validateObjectKey(key));
    if (!object) throw artifactNotFound(this.uriOf(key));
    return Buffer.from(object.data);
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const object = this.objects.get(validateObjectKey(key));
    return object
      ? { key, uri: this.uriOf(key), bytes: object.data.byteLength, lastModified: object.lastModified }
      : undefined;
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    validateKeyPrefix(prefix);
    const keys = [...this.objects.keys()].filter((key) => key.startsWith(prefix)).sort(compareKeys);
    for (const key of keys) {
      const info = await this.head(key);
      if (info) yield info;
    }
  }

  async delete(key: string): Promise<void> {
    this.objects.delete(validateObjectKey(key));
  }

  async close(): Promise<void> {}
}
