import { Readable } from 'node:stream';
import { TransientError, BadInputError } from '../errors';
import type { ArtifactStore } from './artifact-store';
import { MemoryArtifactStore } from './memory-artifact-store';
import { withStorageRetries, type StorageRetryPolicy } from './retrying-artifact-store';

/** A memory store whose operations fail with `error` until `failures` runs out. */
function flakyStore(
  failures: number,
  error: Error,
): { store: ArtifactStore; calls: () => number; failNext: (count: number) => void } {
  const inner = new MemoryArtifactStore();
  let calls = 0;
  let left = failures;
  const gate = () => {
    calls += 1;
    if (left > 0) {
      left -= 1;
      throw error;
    }
  };
  const store: ArtifactStore = {
    rootUri: inner.rootUri,
    uriOf: (key) => inner.uriOf(key),
    keyOf: (uri) => inner.keyOf(uri),
    put: async (key, body) => (gate(), inner.put(key, body)),
    getStream: async (key) => (gate(), inner.getStream(key)),
    getBuffer: async (key) => (gate(), inner.getBuffer(key)),
    head: async (key) => (gate(), inner.head(key)),
    delete: async (key) => (gate(), inner.delete(key)),
    list: (prefix) => ({
      async *[Symbol.asyncIterator]() {
        gate();
        yield* inner.list(prefix);
      },
    }),
    close: () => inner.close(),
  };
  return { store, calls: () => calls, failNext: (count) => (left = count) };
}

function virtualTime(): Pick<StorageRetryPolicy, 'sleep' | 'now' | 'random'> & { waited: number[] } {
  let clock = 0;
  const waited: number[] = [];
  return {
    waited,
    now: () => clock,
    random: () => 1,
    sleep: async (ms) => {
      waited.push(ms);
      clock += ms;
    },
  };
}

const outage = () =>
  new TransientError(
    'STORAGE_READ_ONLY',
    'put file:///data/x: the file system is read-only (EROFS); remount it read-write',
  );

describe('withStorageRetries', () => {
  it('waits out a storage outage of minutes with capped exponential backoff, then succeeds', async () => {
    const time = virtualTime();
    const { store, calls } = flakyStore(8, outage());
    const retrying = withStorageRetries(store, { budgetMs: 300_000, initialDelayMs: 500, maxDelayMs: 30_000, ...time });
    await expect(retrying.put('a.json', '{}')).resolves.toMatchObject({ key: 'a.json' });
    expect(calls()).toBe(9);
    expect(time.waited).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    expect(time.waited.reduce((sum, ms) => sum + ms, 0)).toBeGreaterThan(60_000);
  });

  it('gives up after the budget with the real cause and how long it tried', async () => {
    const time = virtualTime();
    const { store } = flakyStore(1_000, outage());
    const retrying = withStorageRetries(store, {
      budgetMs: 120_000,
      initialDelayMs: 1_000,
      maxDelayMs: 30_000,
      ...time,
    });
    await expect(retrying.getBuffer('a.json')).rejects.toThrow(
      /^\[STORAGE_READ_ONLY\] put file:\/\/\/data\/x: the file system is read-only \(EROFS\).*\(retried \d+ times over 120 s\)$/,
    );
    expect(time.waited.reduce((sum, ms) => sum + ms, 0)).toBe(120_000);
  });

  it('does not retry bad input, nor a streamed put it could not replay', async () => {
    const time = virtualTime();
    const missing = flakyStore(1, new BadInputError('ARTIFACT_NOT_FOUND', 'x does not exist'));
    await expect(
      withStorageRetries(missing.store, { budgetMs: 60_000, initialDelayMs: 10, maxDelayMs: 100, ...time }).head('x'),
    ).rejects.toThrow('[ARTIFACT_NOT_FOUND]');
    expect(missing.calls()).toBe(1);
    const streamed = flakyStore(1, outage());
    await expect(
      withStorageRetries(streamed.store, { budgetMs: 60_000, initialDelayMs: 10, maxDelayMs: 100, ...time }).put(
        's',
        Readable.from(['x']),
      ),
    ).rejects.toThrow('[STORAGE_READ_ONLY]');
    expect(streamed.calls()).toBe(1);
  });

  it('restarts a listing that failed before its first object, listing every object once', async () => {
    const time = virtualTime();
    const failing = flakyStore(0, outage());
    await failing.store.put('runs/a', '1');
    await failing.store.put('runs/b', '2');
    failing.failNext(2);
    const listed: string[] = [];
    for await (const object of withStorageRetries(failing.store, {
      budgetMs: 60_000,
      initialDelayMs: 10,
      maxDelayMs: 100,
      ...time,
    }).list('runs/'))
      listed.push(object.key);
    expect(listed).toEqual(['runs/a', 'runs/b']);
  });
});
