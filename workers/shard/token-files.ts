import { createWriteStream, closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { mkdtemp, rm, unlink } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { HatError } from '../../shared/errors';

/** One part's token file as the packer reads it: an open descriptor and how many ids it holds. */
export interface TokenFile {
  fd: number;
  tokens: number;
}

const littleEndian = endianness() === 'LE';

/**
 * Reads samples' token ids out of the parts' token files (`<part>.tokens.bin`: little-endian
 * int32, part-files.ts) by part, offset and count. The descriptors are the process's, so the
 * packing thread reads through the same ones the fan-in opened.
 */
export class TokenFileReader {
  constructor(private readonly files: ReadonlyArray<TokenFile | undefined>) {}

  /** `count` ids of `part` from `offset`, read into the start of `into` (a view of it is returned). */
  read(part: number, offset: number, count: number, into: Int32Array): Int32Array {
    const file = this.files[part];
    if (file === undefined || offset + count > file.tokens)
      throw new HatError('PART_OUTPUT_DAMAGED', `part ${part} holds fewer tokens than its entries name`);
    const ids = into.subarray(0, count);
    const bytes = new Uint8Array(ids.buffer, ids.byteOffset, count * 4);
    let done = 0;
    while (done < bytes.length) {
      const read = readSync(file.fd, bytes, done, bytes.length - done, offset * 4 + done);
      if (read === 0) throw new HatError('PART_OUTPUT_DAMAGED', `part ${part}'s token file ended early`);
      done += read;
    }
    if (!littleEndian) {
      const view = new DataView(ids.buffer, ids.byteOffset, count * 4);
      for (let index = 0; index < count; index++) ids[index] = view.getInt32(index * 4, true);
    }
    return ids;
  }
}

/**
 * The parts' token ids copied from the store to local scratch files for the fan-in's packing,
 * which places any part's samples in any sequence. Holding them all in memory made a worker grow
 * with the run (4 bytes a token: about 2.4 GB at 100,000 tasks); read back a sample at a time,
 * the fan-in holds one shard's columns whatever the run's size, and the page cache keeps what
 * fits. The files go under the system's temporary directory (TMPDIR) and are unlinked as soon
 * as they are open, so nothing is left behind when the process dies; `close` releases them.
 */
export class SpilledTokens {
  private constructor(readonly files: TokenFile[]) {}

  /** Copies each part's token file (`key`, `tokens` ids) to scratch; a size that differs fails the fan-in. */
  static async spill(
    store: ArtifactStore,
    parts: ReadonlyArray<{ key: string; tokens: number }>,
  ): Promise<SpilledTokens> {
    const directory = await mkdtemp(join(tmpdir(), 'hat-shard-tokens-'));
    const spilled = new SpilledTokens([]);
    try {
      for (const [index, part] of parts.entries()) {
        const path = join(directory, `${index}.bin`);
        await pipeline(await store.getStream(part.key), createWriteStream(path));
        const fd = openSync(path, 'r');
        await unlink(path);
        spilled.files.push({ fd, tokens: part.tokens });
        const bytes = fstatSync(fd).size;
        if (bytes !== part.tokens * 4)
          throw new HatError(
            'PART_OUTPUT_DAMAGED',
            `${store.uriOf(part.key)} holds ${bytes / 4} tokens, its part recorded ${part.tokens}; rerun the stage (the part is redone)`,
          );
      }
      return spilled;
    } catch (error) {
      spilled.close();
      throw error;
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }

  reader(): TokenFileReader {
    return new TokenFileReader(this.files);
  }

  close(): void {
    for (const file of this.files.splice(0)) closeSync(file.fd);
  }
}
