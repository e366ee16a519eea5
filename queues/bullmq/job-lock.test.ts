import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { LockGuardedStore, type JobLockProbe } from './job-lock';

describe('LockGuardedStore', () => {
  let directory: string;
  let inner: FileArtifactStore;
  let now = 0;
  let asked = 0;
  let held: boolean | Error = true;
  let cancelled = false;
  const probe: JobLockProbe = {
    async holds() {
      asked += 1;
      if (held instanceof Error) throw held;
      return held;
    },
    cancelledForLostLock: () => cancelled,
  };
  const guarded = () =>
    new LockGuardedStore(inner, 'collect:r.collect.part-00001.0123456789ab', probe, 30_000, () => now);
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-job-lock-'));
    inner = new FileArtifactStore(directory);
    now = 0;
    asked = 0;
    held = true;
    cancelled = false;
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('asks Redis nothing before half the lock has passed, then at most once per half lock', async () => {
    const store = guarded();
    now = 14_999;
    await store.put('a.txt', 'a');
    expect(asked).toBe(0);
    now = 15_000;
    await store.put('b.txt', 'b');
    now = 20_000;
    await store.put('c.txt', 'c');
    expect(asked).toBe(1);
    now = 30_000;
    await store.put('d.txt', 'd');
    expect(asked).toBe(2);
    expect((await inner.getBuffer('d.txt')).toString()).toBe('d');
  });

  it('writes and deletes nothing once the lock is another worker’s, naming the job and the object; reads go on', async () => {
    await inner.put('kept.txt', 'kept');
    const store = guarded();
    now = 40_000;
    held = false;
    await expect(store.put('runs/r/collect/part-00001.jsonl.gz', 'x')).rejects.toThrow(
      /^\[LOCK_LOST\] collect:r\.collect\.part-00001\.0123456789ab: refused to put runs\/r\/collect\/part-00001\.jsonl\.gz: the job's lock is gone/,
    );
    held = true;
    await expect(store.put('other.txt', 'x')).rejects.toThrow(/LOCK_LOST/);
    await expect(store.delete('kept.txt')).rejects.toThrow(/LOCK_LOST/);
    await expect(store.sweepTemporary('runs/')).rejects.toThrow(/LOCK_LOST/);
    expect(await inner.head('runs/r/collect/part-00001.jsonl.gz')).toBeUndefined();
    expect((await store.getBuffer('kept.txt')).toString()).toBe('kept');
    expect(store.uriOf('kept.txt')).toBe(inner.uriOf('kept.txt'));
  });

  it('refuses at once when the job was cancelled for a lost lock, and writes when Redis cannot tell', async () => {
    const store = guarded();
    now = 40_000;
    held = new Error('Connection is closed.');
    await store.put('a.txt', 'a');
    cancelled = true;
    await expect(store.put('b.txt', 'b')).rejects.toThrow(/LOCK_LOST/);
    expect(asked).toBe(1);
    expect(await inner.head('a.txt')).toBeDefined();
  });
});
