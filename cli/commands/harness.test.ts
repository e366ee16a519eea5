import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CliContext } from '../cli-context';
import { runCli } from '../main';
import { harnessHash } from '../../shared/harness/harness-hash';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { writeHarness } from '../../shared/harness/write-harness';

/** Runs `hat` in-process and captures what a user would see. */
async function hat(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  stdout.on('data', (chunk: Buffer) => chunks.stdout.push(chunk));
  stderr.on('data', (chunk: Buffer) => chunks.stderr.push(chunk));
  const code = await runCli(argv, new CliContext(stdout, stderr, {}));
  return {
    code,
    stdout: Buffer.concat(chunks.stdout).toString('utf8'),
    stderr: Buffer.concat(chunks.stderr).toString('utf8'),
  };
}

let scratch: string;
const sample = sampleHarnessDirectory();

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-cli-harness-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('hat harness validate', () => {
  it('prints counts and the content hash of a valid harness (exit 0)', async () => {
    const result = await hat('harness', 'validate', sample);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const hash = harnessHash(await loadHarness(sample));
    expect(result.stdout).toContain('harness live-host 1.0.0: ok');
    expect(result.stdout).toContain('  sections: 6 (persona, rules, skills, tools_guide, constraints, room_context)');
    expect(result.stdout).toContain('  skills:   7');
    expect(result.stdout).toContain('  tools:    9');
    expect(result.stdout).toContain('  hooks:    6');
    expect(result.stdout).toContain(`  hash:     ${hash}`);
  });

  it('prints the summary as JSON with --json', async () => {
    const result = await hat('harness', 'validate', sample, '--json');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      id: 'live-host',
      format: 'markdown',
      counts: { sections: 6, skills: 7, tools: 9, hooks: 6 },
    });
  });

  it('exits 2 and lists every problem of a broken harness', async () => {
    const directory = join(scratch, 'broken');
    await writeHarness(await loadHarness(sample), directory);
    const manifest = join(directory, 'harness.yaml');
    await writeFile(manifest, (await readFile(manifest, 'utf8')).replace('event: before_reply', 'event: on_reply'));
    await writeFile(join(directory, 'tools', 'get_live_script.json'), '{ "type": "function", ');
    const result = await hat('harness', 'validate', directory);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^hat: \[BAD_HARNESS\] .*broken: invalid harness \(2 problems\):\n/);
    expect(result.stderr).toMatch(/ {2}- harness\.yaml: line \d+: hooks\[0\]\.event: unknown hook event "on_reply"/);
    expect(result.stderr).toMatch(/ {2}- tools\/get_live_script\.json: (line \d+: )?invalid JSON/);
  });

  it('exits 2 for a directory that does not exist, and for a missing argument', async () => {
    expect((await hat('harness', 'validate', join(scratch, 'nothing-here'))).code).toBe(2);
    const missing = await hat('harness', 'validate');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'dir'");
  });
});

describe('hat harness diff', () => {
  let changed: string;

  beforeAll(async () => {
    const harness = await loadHarness(sample);
    changed = join(scratch, 'changed');
    await writeHarness(
      {
        ...harness,
        version: '1.1.0',
        prompt: { ...harness.prompt, format: 'xml' },
        hooks: harness.hooks.map((hook) =>
          hook.id === 'reply_length' ? { ...hook, constraint: { type: 'max_chars', value: 80 } } : hook,
        ),
      },
      changed,
    );
  });

  it('prints the changes as text (exit 0)', async () => {
    const result = await hat('harness', 'diff', sample, changed);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^--- live-host 1\.0\.0 \([0-9a-f]{12}\)\n\+\+\+ live-host 1\.1\.0 \([0-9a-f]{12}\)\n/,
    );
    expect(result.stdout).toContain('prompt\n  format: markdown -> xml\n');
    expect(result.stdout).toContain('hooks\n  ~ hook reply_length\n      constraint: max_chars 60 -> max_chars 80\n');
  });

  it('prints the structured diff with --json', async () => {
    const result = await hat('harness', 'diff', sample, changed, '--json');
    expect(result.code).toBe(0);
    const diff = JSON.parse(result.stdout);
    expect(diff.identical).toBe(false);
    expect(diff.format).toEqual({ before: 'markdown', after: 'xml' });
    expect(diff.hooks.changed[0].id).toBe('reply_length');
  });

  it('says so when two harnesses do not differ', async () => {
    const result = await hat('harness', 'diff', sample, sample);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\nno differences\n$/);
  });

  it('exits 2 naming the problems of both sides when both are invalid', async () => {
    const harness = await loadHarness(sample);
    const sides = [join(scratch, 'broken-a'), join(scratch, 'broken-b')];
    for (const side of sides) {
      await writeHarness(harness, side);
      await writeFile(join(side, 'skills', 'compliance.md'), '---\nid: compliance\n---\n');
    }
    const result = await hat('harness', 'diff', ...sides);
    expect(result.code).toBe(2);
    for (const side of sides)
      expect(result.stderr).toContain(`${join(side, 'skills', 'compliance.md')}: line 2: name: missing`);
    expect((await hat('harness', 'diff', join(scratch, 'nothing-a'), sample)).code).toBe(2);
  });
});
