import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { HatEnv } from '../config/env';
import type { ArtifactStore } from './artifact-store';
import { parseArtifactUri } from './artifact-uri';
import { FileArtifactStore } from './file-artifact-store';
import { validateKeyPrefix, validateObjectKey } from './object-key';
import { S3ArtifactStore, type S3Settings } from './s3-artifact-store';

/** The environment settings a store reads (a parsed `HatEnv` fits; every field is optional). */
export type ArtifactStoreEnv = Partial<
  Pick<
    HatEnv,
    | 'S3_ENDPOINT'
    | 'S3_REGION'
    | 'S3_FORCE_PATH_STYLE'
    | 'AWS_ACCESS_KEY_ID'
    | 'AWS_SECRET_ACCESS_KEY'
    | 'AWS_SESSION_TOKEN'
    | 'HAT_STORAGE_RETRY_MS'
    | 'HAT_STORAGE_RETRY_MAX_DELAY_MS'
    | 'HAT_MAX_RECORD_BYTES'
  >
>;

/** S3 settings from the environment variables of shared/config/env.ts. */
export function s3SettingsFromEnv(env: ArtifactStoreEnv): S3Settings {
  return {
    endpoint: env.S3_ENDPOINT,
    region: env.S3_REGION,
    forcePathStyle: env.S3_FORCE_PATH_STYLE === undefined ? undefined : env.S3_FORCE_PATH_STYLE === 'true',
    accessKeyId: env.AWS_ACCESS_KEY_ID,
    secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
    sessionToken: env.AWS_SESSION_TOKEN,
  };
}

/**
 * The store rooted at a URI, backend chosen by scheme: `s3://bucket/prefix` or `file:///abs/dir`.
 * Throws BadInputError `BAD_ARTIFACT_URI` for anything else.
 */
export function createArtifactStore(uri: string, env: ArtifactStoreEnv = {}): ArtifactStore {
  const location = parseArtifactUri(uri);
  if (location.scheme === 'file') return new FileArtifactStore(location.path);
  const prefix = location.key.replace(/\/+$/, '');
  return new S3ArtifactStore({
    bucket: location.bucket,
    prefix: prefix ? validateObjectKey(prefix) : '',
    settings: s3SettingsFromEnv(env),
  });
}

/** A store and the key of one object in it, for commands that take a single object URI. */
export function openArtifactObject(uri: string, env: ArtifactStoreEnv = {}): { store: ArtifactStore; key: string } {
  const location = parseArtifactUri(uri);
  if (location.scheme === 'file')
    return { store: new FileArtifactStore(dirname(location.path)), key: validateObjectKey(basename(location.path)) };
  return { store: createArtifactStore(`s3://${location.bucket}`, env), key: validateObjectKey(location.key) };
}

/**
 * A store and a listing prefix for a URI that names a "folder" or the start of keys
 * (`s3://b/runs/r1/`, `file:///tmp/out/runs/r1/collect/part-`).
 */
export async function openArtifactPrefix(
  uri: string,
  env: ArtifactStoreEnv = {},
): Promise<{ store: ArtifactStore; prefix: string }> {
  const location = parseArtifactUri(uri);
  if (location.scheme === 's3')
    return { store: createArtifactStore(`s3://${location.bucket}`, env), prefix: validateKeyPrefix(location.key) };
  const isDirectory = await stat(location.path).then(
    (info) => info.isDirectory(),
    () => false,
  );
  if (isDirectory || uri.endsWith('/')) return { store: new FileArtifactStore(location.path), prefix: '' };
  return { store: new FileArtifactStore(dirname(location.path)), prefix: validateKeyPrefix(basename(location.path)) };
}
