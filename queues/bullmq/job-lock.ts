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

/** What a guard asks about its job. */
export interface JobLockProbe {
  /** Whether the lock is still the job's (undefined when Redis cannot tell). */
  holds(): Promise<boolean | undefined>;
  /** Whether the job was cancelled because its lock renewal failed. */
  cancelledForLostLock(): boolean;
}

/**
 * The store one job writes through: every write first checks the lock (see above); reads pass as
 * they are. A class, not a wrapper of closures: one is made per job, and the framework's per-job
 * cost is measured (bench/framework.bench.ts).
 */
export class LockGuardedStore implements ArtifactStore {
  private verifiedAt: number;
  private lost = false;

  constructor(
    private readonly store: ArtifactStore,
    private readonly jobLabel: string,
    private readonly probe: JobLockProbe,
    private readonly lockDurationMs: number,
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.verifiedAt = now();
  }

  get rootUri(): string {
    return this.store.rootUri;
  }

  uriOf(key: string): string {
    return this.store.uriOf(key);
  }

  keyOf(uri: string): string {
    return this.store.keyOf(uri);
  }

  async put(key: string, body: string | Uint8Array | Readable, options?: PutOptions): Promise<ObjectInfo> {
    await this.check('put', key);
    return this.store.put(key, body, options);
  }

  getStream(key: string): Promise<Readable> {
    return this.store.getStream(key);
  }

  getBuffer(key: string): Promise<Buffer> {
    return this.store.getBuffer(key);
  }

  head(key: string): Promise<ObjectInfo | undefined> {
    return this.store.head(key);
  }

  list(prefix: string): AsyncIterable<ObjectInfo> {
    return this.store.list(prefix);
  }

  async delete(key: string): Promise<void> {
    await this.check('delete', key);
    return this.store.delete(key);
  }

  /** Sweeps like the store it guards (0 when that store leaves no temp files). */
  async sweepTemporary(prefix: string): Promise<number> {
    if (!this.store.sweepTemporary) return 0;
    await this.check('sweep temp files under', prefix);
    return this.store.sweepTemporary(prefix);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  /** Resolves when the job may still write; throws LOCK_LOST when its lock is another worker's. */
  async check(operation: string, key: string): Promise<void> {
    if (!this.lost && this.probe.cancelledForLostLock()) this.lost = true;
    if (!this.lost && this.now() - this.verifiedAt >= this.lockDurationMs / 2) {
      const asked = this.now();
      // A Redis that does not answer cannot say; BullMQ still refuses to finish a job whose lock is gone.
      const held = await this.probe.holds().catch(() => undefined);
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
