import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runHatInProcess } from './support/hat-in-process';

/** docs/contributing/stage.md, step 4, as a user follows it: `hat stage hash-demo` with a config file. */

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-contributing-stage-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

function hat(...argv: string[]) {
  return runHatInProcess({ HAT_LOG_LEVEL: 'silent' }, ...argv);
}

it('runs the example stage in-process: digests and the manifest, the same bytes again, a bad field refused', async () => {
  const config = join(scratch, 'hash.yaml');
  await writeFile(config, 'parts: 3\nrounds: 1000\n');
  const outputs: string[] = [];
  for (const name of ['first', 'second']) {
    const out = join(scratch, name);
    const result = await hat('stage', 'hash-demo', '--config', config, '--out', pathToFileURL(out).href);
    expect([result.code, result.stderr]).toEqual([0, expect.not.stringMatching(/hat:/)]);
    expect((await readdir(out)).sort()).toEqual(['_state', 'digests.jsonl.gz', 'manifest.json']);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      stage: string;
      objects: Array<{ key: string; sha256: string; records: number }>;
      stats: { parts: number };
    };
    expect(manifest.stats.parts).toBe(3);
    expect(manifest.objects.map((object) => [object.key, object.records])).toEqual([['digests.jsonl.gz', 3]]);
    outputs.push(manifest.objects[0].sha256);
  }
  expect(outputs[1]).toBe(outputs[0]);

  await writeFile(config, 'parts: 3\nround: 1000\n');
  const bad = await hat('stage', 'hash-demo', '--config', config, '--out', pathToFileURL(join(scratch, 'bad')).href);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/hash\.yaml.*line 2.*round/);
});
