import type { Readable } from 'node:stream';
import type { ArtifactStore, ObjectInfo, PutOptions } from '../../shared/artifacts/artifact-store';
import { HatError } from '../../shared/errors';

/**
 * A job's writes, refused once its lock is another worker's.
 *
 * A worker paused past its lock (a stopped container, a long GC, a suspended VM) loses the job:
 * the stalled check hands it to another worker, which runs it again. When the paused worker
 * resumes, its copy of the job would go on and write the job's outputs a second time, under the
 * same keys the other worker writes. For a stage whose outputs are byte-identical on every run
 * (same inputs and seed) that is harmless, but a stage that samples a live model writes different
 * bytes, which would replace the other worker's objects after its manifest recorded them. So
 * before each write, a job that has run longer than half its lock asks Redis whether the lock is
 * still its own (one GET; shorter jobs cannot have lost it and pay nothing), and a job whose lock
 * renewal failed (BullMQ's `lockRenewalFailed`, see worker-factory.ts) writes nothing more. What
 * is left is a write already on its way when the pause began: it lands late, with what this
 * worker computed.
 */

/** Default lock duration (BullMQ's): a job whose lock is not renewed for this long is stalled. */
export const defaultLockDurationMs = 30_000;

/** The reason a job is cancelled with when its lock is lost (the binding then leaves it alone). */
export const lockLostReason = 'lock-lost';

export class JobLockGuard {
  private verifiedAt: number;
  private lost = false;

  /**
   * `holds`: whether the lock is still this job's (undefined when Redis cannot tell);
   * `cancelled`: whether the job was cancelled for a lost lock.
   */
  constructor(
    private readonly jobLabel: string,
    private readonly holds: () => Promise<boolean | undefined>,
    private readonly lockDurationMs: number,
    private readonly cancelledForLostLock: () => boolean,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.verifiedAt = now();
  }

  /** Resolves when the job may still write; throws LOCK_LOST when its lock is another worker's. */
  async check(operation: string, key: string): Promise<void> {
    if (!this.lost && this.cancelledForLostLock()) this.lost = true;
    if (!this.lost && this.now() - this.verifiedAt >= this.lockDurationMs / 2) {
      const asked = this.now();
      // A Redis that does not answer cannot say; BullMQ still refuses to finish a job whose lock is gone.
      const held = await this.holds().catch(() => undefined);
      if (held === false) this.lost = true;
      else if (held === true) this.verifiedAt = asked;
    }
    if (this.lost)
      throw new HatError(
        'LOCK_LOST',
        `${this.jobLabel}: refused to ${operation} ${key}: the job's lock is gone (this worker was paused past it), so another worker runs the job and writes its outputs`,
        { retryable: true },
      );
  }
}

/** The store a job writes through: every write first asks the guard. Reads pass as they are. */
export function guardStoreWrites(store: ArtifactStore, guard: JobLockGuard): ArtifactStore {
  const guarded: ArtifactStore = {
    get rootUri() {
      return store.rootUri;
    },
    uriOf: (key) => store.uriOf(key),
    keyOf: (uri) => store.keyOf(uri),
    async put(key: string, body: string | Uint8Array | Readable, options?: PutOptions): Promise<ObjectInfo> {
      await guard.check('put', key);
      return store.put(key, body, options);
    },
    getStream: (key) => store.getStream(key),
    getBuffer: (key) => store.getBuffer(key),
    head: (key) => store.head(key),
    list: (prefix) => store.list(prefix),
    async delete(key: string): Promise<void> {
      await guard.check('delete', key);
      return store.delete(key);
    },
    close: () => store.close(),
  };
  const sweep = store.sweepTemporary?.bind(store);
  if (sweep)
    guarded.sweepTemporary = async (prefix: string) => {
      await guard.check('sweep temp files under', prefix);
      return sweep(prefix);
    };
  return guarded;
}
