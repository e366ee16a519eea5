import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { errorCodeOf } from '../errors';
import { parseArtifactUri } from './artifact-uri';
import {
  createArtifactStore,
  openArtifactObject,
  openArtifactPrefix,
  s3SettingsFromEnv,
} from './create-artifact-store';
import { FileArtifactStore } from './file-artifact-store';
import { S3ArtifactStore } from './s3-artifact-store';

describe('parseArtifactUri', () => {
  it('splits s3 and file URIs', () => {
    expect(parseArtifactUri('s3://hat-artifacts/runs/r1/')).toEqual({
      scheme: 's3',
      bucket: 'hat-artifacts',
      key: 'runs/r1/',
    });
    expect(parseArtifactUri('s3://hat-artifacts')).toEqual({ scheme: 's3', bucket: 'hat-artifacts', key: '' });
    expect(parseArtifactUri('file:///tmp/hat%20out/x')).toEqual({ scheme: 'file', path: '/tmp/hat out/x' });
  });

  it.each(['ftp://host/x', '/tmp/x', 's3://Bad_Bucket/x', 's3:///x', 'file://remote-host/x'])(
    'rejects %j with BAD_ARTIFACT_URI',
    (uri) => {
      let caught: unknown;
      try {
        parseArtifactUri(uri);
      } catch (error) {
        caught = error;
      }
      expect(errorCodeOf(caught)).toBe('BAD_ARTIFACT_URI');
      expect((caught as Error).message).toContain('use s3://bucket/prefix or file:///absolute/path');
    },
  );
});

describe('createArtifactStore', () => {
  it('chooses the backend by scheme and roots the store at the URI', async () => {
    const s3 = createArtifactStore('s3://hat-artifacts/team/a/', { S3_ENDPOINT: 'http://127.0.0.1:9000' });
    expect(s3).toBeInstanceOf(S3ArtifactStore);
    expect(s3.rootUri).toBe('s3://hat-artifacts/team/a');
    expect(s3.uriOf('runs/r1/manifest.json')).toBe('s3://hat-artifacts/team/a/runs/r1/manifest.json');
    expect(s3.keyOf('s3://hat-artifacts/team/a/runs/r1/manifest.json')).toBe('runs/r1/manifest.json');
    expect(() => s3.keyOf('s3://hat-artifacts/team/ab/x')).toThrow(/URI_OUTSIDE_STORE/);
    await s3.close();

    const file = createArtifactStore('file:///srv/hat');
    expect(file).toBeInstanceOf(FileArtifactStore);
    expect(file.uriOf('runs/x y.json')).toBe('file:///srv/hat/runs/x%20y.json');
    expect(file.keyOf('file:///srv/hat/runs/x%20y.json')).toBe('runs/x y.json');
    expect(() => file.keyOf('file:///srv/hat-other/x')).toThrow(/URI_OUTSIDE_STORE/);
    expect(() => createArtifactStore('s3://hat-artifacts/a//b')).toThrow(/BAD_OBJECT_KEY/);
  });

  it('reads S3 settings from the environment: path style by default only with an endpoint', () => {
    expect(
      s3SettingsFromEnv({
        S3_ENDPOINT: 'http://minio:9000',
        S3_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'id',
        AWS_SECRET_ACCESS_KEY: 'secret',
      }),
    ).toEqual({
      endpoint: 'http://minio:9000',
      region: 'eu-west-1',
      forcePathStyle: undefined,
      accessKeyId: 'id',
      secretAccessKey: 'secret',
      sessionToken: undefined,
    });
    expect(s3SettingsFromEnv({ S3_FORCE_PATH_STYLE: 'false' }).forcePathStyle).toBe(false);
  });
});

describe('openArtifactObject / openArtifactPrefix', () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-open-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('split a URI into a store and a key or prefix', async () => {
    const object = openArtifactObject('s3://hat-artifacts/runs/r1/collect/manifest.json');
    expect([object.store.rootUri, object.key]).toEqual(['s3://hat-artifacts', 'runs/r1/collect/manifest.json']);
    await object.store.close();

    const base = pathToFileURL(directory).href;
    const folder = await openArtifactPrefix(base);
    expect([folder.store.rootUri, folder.prefix]).toEqual([base, '']);
    const partWay = await openArtifactPrefix(`${base}/runs/r1/part-`);
    expect([partWay.store.rootUri, partWay.prefix]).toEqual([`${base}/runs/r1`, 'part-']);
    const s3 = await openArtifactPrefix('s3://hat-artifacts/runs/');
    expect([s3.store.rootUri, s3.prefix]).toEqual(['s3://hat-artifacts', 'runs/']);
    await s3.store.close();
  });
});
