import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { planRun, readConfigFile } from '../queues/runs/run-config';
import { registerCatalogStages } from '../workers/stage-catalog';

/** The README is the front door: short, its config example a run that plans, and no link in it or in docs/ that leads nowhere. */

const root = join(__dirname, '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

function markdownFiles(directory: string): string[] {
  return readdirSync(directory).flatMap((name) => {
    const path = join(directory, name);
    return statSync(path).isDirectory() ? markdownFiles(path) : name.endsWith('.md') ? [path] : [];
  });
}

it('the README stays a front door: at most 250 lines, the two commands first', () => {
  expect(readme.split('\n').length).toBeLessThanOrEqual(250);
  const firstCode = /```bash\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
  expect(firstCode).toMatch(/^make demo\b/m);
  expect(firstCode).toMatch(/^make test\b/m);
});

it("the README's run config example plans as a run", async () => {
  registerCatalogStages();
  const yaml = /## A run config\n\n```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(yaml).toBeDefined();
  const scratch = await mkdtemp(join(tmpdir(), 'hat-readme-'));
  try {
    const file = join(scratch, 'run.yaml');
    await writeFile(file, yaml as string);
    const source = await readConfigFile(file);
    const plan = planRun(source.value, {
      env: { HAT_ARTIFACTS: 's3://hat/readme' },
      now: new Date('2026-01-01T00:00:00Z'),
      file,
      locator: source.locator,
    });
    expect(plan.stages.map((stage) => stage.name).sort()).toEqual(['augment', 'collect', 'eval', 'shard']);
    expect(plan.handoffs.map((handoff) => handoff.name)).toEqual(['sft']);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
});

it('every relative link in the README and docs/ leads to a file that exists', () => {
  const files = [join(root, 'README.md'), ...markdownFiles(join(root, 'docs'))];
  const broken: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1].split('#')[0];
      if (target === '' || /^[a-z]+:/.test(target)) continue;
      if (!existsSync(join(dirname(file), target))) broken.push(`${relative(root, file)}: ${match[1]}`);
    }
  }
  expect(broken).toEqual([]);
});
