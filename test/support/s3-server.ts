import { randomUUID } from 'node:crypto';
import { s3SettingsFromEnv } from '../../shared/artifacts/create-artifact-store';
import { S3ArtifactStore, type S3ArtifactStoreOptions } from '../../shared/artifacts/s3-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../../shared/artifacts/local-s3-server';

/** One local S3-compatible server per test file, with a fresh `test-<uuid>` prefix per store. */
export interface LocalS3Fixture {
  /** The running server (valid inside tests, after beforeAll). */
  readonly server: LocalS3Server;
  /** S3_* / AWS_* variables pointing at the server, for code that reads the environment. */
  readonly env: LocalS3Server['env'];
  /** A store under a new unique prefix of the server's bucket; closed after all tests. */
  store(options?: Partial<Omit<S3ArtifactStoreOptions, 'bucket' | 'settings'>>): S3ArtifactStore;
  /** `s3://<bucket>/test-<uuid>`: a fresh root URI for code that takes a URI. */
  freshUri(): string;
}

/**
 * Registers beforeAll/afterAll hooks that start s3rver (see shared/artifacts/local-s3-server.ts)
 * and stop it, closing every store handed out.
 */
export function useLocalS3Server(): LocalS3Fixture {
  let server: LocalS3Server | undefined;
  const stores: S3ArtifactStore[] = [];
  beforeAll(async () => {
    server = await startLocalS3Server({ bucket: `test-${randomUUID().slice(0, 8)}` });
  });
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await server?.stop();
  });
  const running = (): LocalS3Server => {
    if (!server) throw new Error('the local S3 server is not running: use the fixture inside tests');
    return server;
  };
  return {
    get server() {
      return running();
    },
    get env() {
      return running().env;
    },
    store(options = {}) {
      const { bucket, env } = running();
      const store = new S3ArtifactStore({
        prefix: `test-${randomUUID()}`,
        ...options,
        bucket,
        settings: s3SettingsFromEnv(env),
      });
      stores.push(store);
      return store;
    },
    freshUri() {
      return `s3://${running().bucket}/test-${randomUUID()}`;
    },
  };
}
