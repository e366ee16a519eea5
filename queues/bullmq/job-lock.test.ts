import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobLockGuard, guardStoreWrites } from './job-lock';

describe('JobLockGuard', () => {
  let now = 0;
  let asked = 0;
  let held: boolean | undefined | Error = true;
  let cancelled = false;
  const guard = () =>
    new JobLockGuard(
      'collect:r.collect.part-00001.0123456789ab',
      async () => {
        asked += 1;
        if (held instanceof Error) throw held;
        return held;
      },
      30_000,
      () => cancelled,
      () => now,
    );
  beforeEach(() => {
    now = 0;
    asked = 0;
    held = true;
    cancelled = false;
  });

  it('asks Redis nothing before half the lock has passed, then once per half lock', async () => {
    const lock = guard();
    now = 14_999;
    await lock.check('put', 'a');
    expect(asked).toBe(0);
    now = 15_000;
    await lock.check('put', 'b');
    now = 20_000;
    await lock.check('put', 'c');
    expect(asked).toBe(1);
    now = 30_000;
    await lock.check('put', 'd');
    expect(asked).toBe(2);
  });

  it('refuses every write once the lock is another worker’s, naming the job and the object', async () => {
    const lock = guard();
    now = 40_000;
    held = false;
    await expect(lock.check('put', 'runs/r/collect/part-00001.jsonl.gz')).rejects.toThrow(
      /^\[LOCK_LOST\] collect:r\.collect\.part-00001\.0123456789ab: refused to put runs\/r\/collect\/part-00001\.jsonl\.gz: the job's lock is gone/,
    );
    held = true;
    await expect(lock.check('put', 'other')).rejects.toThrow(/LOCK_LOST/);
  });

  it('refuses at once when the job was cancelled for a lost lock, and lets writes pass when Redis cannot tell', async () => {
    const lock = guard();
    now = 40_000;
    held = new Error('Connection is closed.');
    await lock.check('put', 'a');
    cancelled = true;
    await expect(lock.check('put', 'b')).rejects.toThrow(/LOCK_LOST/);
    expect(asked).toBe(1);
  });
});

describe('guardStoreWrites', () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-job-lock-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('refuses puts and deletes of a job that lost its lock, and still reads', async () => {
    const inner = new FileArtifactStore(directory);
    await inner.put('kept.txt', 'kept');
    let clock = 0;
    // Each look at the clock is a second later: every write is past half the one-second lock.
    const lost = new JobLockGuard(
      'job',
      async () => false,
      1_000,
      () => false,
      () => (clock += 1_000),
    );
    const store = guardStoreWrites(inner, lost);
    await expect(store.put('new.txt', 'x')).rejects.toThrow(/LOCK_LOST/);
    await expect(store.delete('kept.txt')).rejects.toThrow(/LOCK_LOST/);
    expect((await store.getBuffer('kept.txt')).toString()).toBe('kept');
    expect(await inner.head('new.txt')).toBeUndefined();
    expect(store.uriOf('kept.txt')).toBe(inner.uriOf('kept.txt'));
  });
});
