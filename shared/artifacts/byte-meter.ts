import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * A pass-through that counts the bytes and computes the sha256 of what flows through it, so a
 * store learns an object's size and digest in the same pass that writes it.
 */
export class ByteMeter extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private digest?: string;
  bytes = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    this.hash.update(chunk);
    callback(null, chunk);
  }

  /** Hex sha256 of every byte seen; call once the stream has ended. */
  sha256(): string {
    this.digest ??= this.hash.digest('hex');
    return this.digest;
  }
}
