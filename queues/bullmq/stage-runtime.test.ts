import { TransientError } from '../../shared/errors';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { createLogger } from '../../shared/log/logger';
import { createStoreCache } from './stage-runtime';

describe('createStoreCache', () => {
  it('logs every storage retry at warn with the object, the cause and the time left of HAT_STORAGE_RETRY_MS', async () => {
    const inner = new MemoryArtifactStore('flaky');
    await inner.put('runs/r/x.json', '{}');
    let failures = 2;
    const flaky: ArtifactStore = Object.assign(Object.create(inner) as ArtifactStore, {
      getBuffer: async (key: string) => {
        if (failures-- > 0) throw new TransientError('S3_UNAVAILABLE', 'get s3://bucket/runs/r/x.json: 503 SlowDown');
        return inner.getBuffer(key);
      },
    });
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(line) } });
    const stores = createStoreCache(
      { HAT_STORAGE_RETRY_MS: 60_000, HAT_STORAGE_RETRY_MAX_DELAY_MS: 1 },
      () => flaky,
      logger,
    );
    const store = stores.storeFor(inner.rootUri);
    expect((await store.getBuffer('runs/r/x.json')).toString()).toBe('{}');
    const warnings = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatchObject({ level: 40, operation: 'get', attempt: 1, uri: inner.uriOf('runs/r/x.json') });
    expect(warnings[0].msg).toContain(
      `storage fault on get ${inner.uriOf('runs/r/x.json')} ([S3_UNAVAILABLE] get s3://bucket/runs/r/x.json: 503 SlowDown); retry 1 in `,
    );
    expect(warnings[0].msg).toMatch(/, (60|59\.\d) s of HAT_STORAGE_RETRY_MS left$/);
    expect(warnings[1]).toMatchObject({ attempt: 2 });
    expect(warnings[1].timeLeftMs as number).toBeLessThanOrEqual(60_000);
    await stores.close();
  });
});
