import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { stageManifestKey, stagePartKey } from '../shared/artifacts/artifact-layout';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { manifestObjectOf, writeManifest, type Manifest } from '../shared/artifacts/manifest';
import { runHatInProcess } from './support/hat-in-process';
import { useLocalS3Server } from './support/s3-server';

const s3 = useLocalS3Server();

const hat = runHatInProcess;

/** Writes a small collect stage (two parts and a manifest) and returns the manifest. */
async function writeStage(store: ArtifactStore): Promise<Manifest> {
  const objects = [];
  for (const part of [0, 1]) {
    const records = Array.from({ length: 3 }, (_, index) => ({ part, index, text: `trajectory ${part}.${index}` }));
    objects.push(
      manifestObjectOf(
        await writeJsonl(store, stagePartKey('run-cli', 'collect', `part-000${part}`, 'jsonl.gz'), records),
        { schemaVersion: 1, format: 'jsonl.gz' },
      ),
    );
  }
  const { manifest } = await writeManifest(
    store,
    stageManifestKey('run-cli', 'collect'),
    {
      stage: 'collect',
      runId: 'run-cli',
      objects,
      lineage: {
        inputs: [{ uri: 's3://elsewhere/tasks.jsonl.gz', sha256: 'b'.repeat(64) }],
        configHash: 'cfg123',
        codeVersion: '0.1.0+test',
      },
      stats: { passRate: 0.5 },
    },
    { clock: () => new Date('2025-03-04T05:06:07.000Z') },
  );
  return manifest;
}

describe('hat artifacts on S3', () => {
  let root: string;
  let manifest: Manifest;
  beforeAll(async () => {
    root = s3.freshUri();
    const store = createArtifactStore(root, s3.env);
    manifest = await writeStage(store);
    await store.close();
  });

  it('ls lists objects in key order with sizes, and --json gives exact fields', async () => {
    const listed = await hat(s3.env, 'artifacts', 'ls', `${root}/runs/run-cli/`);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines.map((line) => line.split(/\s+/).pop())).toEqual([
      `${root}/runs/run-cli/collect/manifest.json`,
      `${root}/runs/run-cli/collect/part-0000.jsonl.gz`,
      `${root}/runs/run-cli/collect/part-0001.jsonl.gz`,
      expect.stringMatching(/B$/),
    ]);
    expect(lines.at(-1)).toMatch(/^3 objects, /);

    const json = await hat(s3.env, 'artifacts', 'ls', `${root}/runs/run-cli/collect/part-`, '--json');
    expect(JSON.parse(json.stdout)).toEqual(
      manifest.objects.map((object) => ({
        uri: object.uri,
        key: expect.stringMatching(/runs\/run-cli\/collect\/part-000\d\.jsonl\.gz$/),
        bytes: object.bytes,
        lastModified: expect.any(String),
      })),
    );
  });

  it('cat prints JSONL gunzipped, or the stored bytes with --raw', async () => {
    const result = await hat(s3.env, 'artifacts', 'cat', `${root}/runs/run-cli/collect/part-0001.jsonl.gz`);
    expect(result.code).toBe(0);
    expect(
      result.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { part: 1, index: 0, text: 'trajectory 1.0' },
      { part: 1, index: 1, text: 'trajectory 1.1' },
      { part: 1, index: 2, text: 'trajectory 1.2' },
    ]);
    const raw = await hat(s3.env, 'artifacts', 'cat', '--raw', `${root}/runs/run-cli/collect/part-0001.jsonl.gz`);
    expect(raw.stdout.charCodeAt(0)).toBe(0x1f);
  });

  it('manifest pretty-prints a stage manifest, given its URI or the stage prefix', async () => {
    const result = await hat(s3.env, 'artifacts', 'manifest', `${root}/runs/run-cli/collect/`);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`manifest ${root}/runs/run-cli/collect/manifest.json`);
    expect(result.stdout).toContain('  stage:        collect');
    expect(result.stdout).toContain('  code version: 0.1.0+test');
    expect(result.stdout).toContain('  objects (2, 6 records,');
    expect(result.stdout).toContain(`    ${root}/runs/run-cli/collect/part-0000.jsonl.gz  (jsonl.gz v1, 3 records,`);
    expect(result.stdout).toContain('    s3://elsewhere/tasks.jsonl.gz  (sha256 bbbbbbbbbbbb)');
    expect(result.stdout).toContain('    passRate: 0.5');
    const json = await hat(s3.env, 'artifacts', 'manifest', `${root}/runs/run-cli/collect/manifest.json`, '--json');
    expect(JSON.parse(json.stdout)).toEqual(manifest);
  });

  it('exits 2 naming the URI when an object is missing or a URI is bad', async () => {
    const missing = await hat(s3.env, 'artifacts', 'cat', `${root}/runs/none.jsonl.gz`);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`[ARTIFACT_NOT_FOUND] ${root}/runs/none.jsonl.gz does not exist`);
    const badUri = await hat(s3.env, 'artifacts', 'ls', 'ftp://host/x');
    expect(badUri.code).toBe(2);
    expect(badUri.stderr).toContain('[BAD_ARTIFACT_URI]');
    const badKey = await hat(s3.env, 'artifacts', 'cat', `${root}/runs/../x`);
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('[BAD_OBJECT_KEY]');
  });
});

describe('hat artifacts on local files', () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-artifacts-cli-'));
    const store = createArtifactStore(pathToFileURL(directory).href);
    await writeStage(store);
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('ls, cat and manifest work on file:// URIs', async () => {
    const base = pathToFileURL(directory).href;
    const listed = await hat({}, 'artifacts', 'ls', `${base}/runs`, '--json');
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as Array<{ uri: string }>).map((item) => item.uri)).toEqual([
      `${base}/runs/run-cli/collect/manifest.json`,
      `${base}/runs/run-cli/collect/part-0000.jsonl.gz`,
      `${base}/runs/run-cli/collect/part-0001.jsonl.gz`,
    ]);
    const cat = await hat({}, 'artifacts', 'cat', `${base}/runs/run-cli/collect/part-0000.jsonl.gz`);
    expect(cat.stdout.split('\n')[0]).toBe('{"part":0,"index":0,"text":"trajectory 0.0"}');
    const shown = await hat({}, 'artifacts', 'manifest', `${base}/runs/run-cli/collect`);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('  run:          run-cli');
  });
});
