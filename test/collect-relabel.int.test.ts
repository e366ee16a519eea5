import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest } from '../shared/artifacts/manifest';
import { trajectorySchema, type Trajectory } from '../shared/trajectory/trajectory';
import { relabelEntrySchema, type AugmentOutput, type RelabelEntry } from '../workers/augment/augment-contract';
import type { CollectOutput } from '../workers/collect/collect-contract';
import { runHatInProcess } from './support/hat-in-process';

/**
 * augment's relabel list fed back to collect: tasks whose recorded reply misses a constraint a
 * variant tightened are played again under that variant, and the new trajectories say so.
 */

const environment = { ...process.env, HAT_LOG_LEVEL: 'silent' };

async function jsonlLines(file: string): Promise<unknown[]> {
  const text = gunzipSync(await readFile(file)).toString('utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as unknown);
}

describe("collect plays augment's relabel list under the variants it names", () => {
  let directory: string;
  let collectOut: string;
  let augmentOut: string;
  let entries: RelabelEntry[];
  const stage = async (name: string, configText: string, out: string, ...extra: string[]) => {
    const config = join(directory, `${name}-${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(config, configText);
    return runHatInProcess(
      environment,
      'stage',
      name,
      '--config',
      config,
      '--out',
      pathToFileURL(out).href,
      '--seed',
      'relabel-it',
      '--json',
      ...extra,
    );
  };

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-relabel-'));
    collectOut = join(directory, 'collect');
    augmentOut = join(directory, 'augment');
    const collected = await stage(
      'collect',
      'generate: { count: 24, seed: relabel-it, itemCount: 200 }\ntasksPerPart: 12\n',
      collectOut,
    );
    expect([collected.code, collected.stderr]).toEqual([0, expect.any(String)]);
    // Hooks only, so constraints change and some recorded replies no longer meet them.
    const augmented = await stage(
      'augment',
      'families: { hooks: 1 }\nvariantPool: 12\nvariantsPerTrajectory: 4\nseed: hsa\n',
      augmentOut,
      '--in',
      pathToFileURL(join(collectOut, 'manifest.json')).href,
    );
    expect(augmented.code).toBe(0);
    expect((JSON.parse(augmented.stdout) as AugmentOutput).relabel).toBeGreaterThan(0);
    entries = (await jsonlLines(join(augmentOut, 'relabel.jsonl.gz'))).map((line) => relabelEntrySchema.parse(line));
  }, 120_000);
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('plays each listed (task, variant) once under the stored variant harness, one part per variant', async () => {
    const out = join(directory, 'relabelled');
    const config = `tasks: ${pathToFileURL(join(collectOut, 'manifest.json')).href}\nrelabel: ${pathToFileURL(join(augmentOut, 'manifest.json')).href}\ntasksPerPart: 100\n`;
    const result = await stage('collect', config, out);
    expect([result.code, result.stderr.includes('[')]).toEqual([0, false]);
    const output = JSON.parse(result.stdout) as CollectOutput;

    const listed = new Set(entries.map((entry) => `${entry.taskId} ${entry.variantHash}`));
    const variants = new Set(entries.map((entry) => entry.variantHash));
    expect(output.tasks).toBe(listed.size);
    const manifest = await readManifest(new FileArtifactStore(out), 'manifest.json');
    const played: Trajectory[] = [];
    for (const object of manifest.objects.filter(
      (entry) => entry.kind === 'trajectories' || entry.kind === 'rejected',
    )) {
      for (const line of await jsonlLines(join(out, object.key))) played.push(trajectorySchema.parse(line));
    }
    expect(new Set(played.map((trajectory) => `${trajectory.taskId} ${trajectory.harness.variantHash}`))).toEqual(
      listed,
    );
    expect(manifest.objects.filter((entry) => entry.kind === 'trajectories')).toHaveLength(variants.size);
    // Played under the variant's own harness: its hash, as augment stored it, not the canonical one.
    for (const trajectory of played) {
      const variantHarness = join(augmentOut, 'variants', trajectory.harness.variantHash ?? '', 'harness.yaml');
      expect(existsSync(variantHarness)).toBe(true);
      expect(trajectory.harness.families).toEqual(['hooks']);
    }
    expect(output.accepted).toBeGreaterThan(0);
    expect(manifest.lineage.inputs.map((input) => input.uri)).toEqual(
      expect.arrayContaining([pathToFileURL(join(augmentOut, 'relabel.jsonl.gz')).href]),
    );
  }, 120_000);

  it('refuses a list naming a task it was not given, or a variant that is not stored, with exit 2 and nothing written', async () => {
    const refused = async (relabelText: string, configExtra = '') => {
      const listDirectory = await mkdtemp(join(directory, 'list-'));
      const list = join(listDirectory, 'relabel.jsonl');
      await writeFile(list, relabelText);
      const out = join(directory, `out-${Math.random().toString(36).slice(2)}`);
      const result = await stage(
        'collect',
        `generate: { count: 24, seed: relabel-it, itemCount: 200 }\nrelabel: ${list}\n${configExtra}`,
        out,
      );
      expect(result.code).toBe(2);
      expect(existsSync(out) ? await readdir(out) : []).toEqual([]);
      return { stderr: result.stderr, list: pathToFileURL(list).href };
    };
    const [first] = entries as [RelabelEntry];
    const unknown = await refused(
      `${JSON.stringify(first)}\n${JSON.stringify({ ...first, taskId: 'no-such-task' })}\n`,
    );
    expect(unknown.stderr).toContain(
      `[UNKNOWN_TASK] ${unknown.list}: record 2: taskId: task "no-such-task" is not among collect's tasks`,
    );
    const missing = await refused(`${JSON.stringify(first)}\n`);
    expect(missing.stderr).toContain(
      `[MISSING_VARIANT] collect.relabel: variant ${first.variantHash} cannot be loaded from ${missing.list.replace(/relabel\.jsonl$/, 'variants/')}${first.variantHash}`,
    );
  }, 60_000);
});
