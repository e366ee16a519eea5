import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { curriculumWeight } from './curriculum';
import { planGroups } from './group-plan';
import { rlInputSchema } from './rl-contract';

let directory: string;
let store: FileArtifactStore;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hat-rl-curriculum-'));
  store = new FileArtifactStore(directory);
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

const openObject = (uri: string) => openArtifactObject(uri);
const tasks = generateTasks({ count: 60, seed: 'curriculum' });
const categories = [...new Set(tasks.map((task) => task.category))].sort();

function shareOf(groups: Array<{ task: { category: string } }>, category: string): number {
  return groups.filter((group) => group.task.category === category).length / groups.length;
}

it('weighs categories by (floor + 1 - previous mean reward) ^ power; unscored categories count as unsolved', () => {
  expect(curriculumWeight(0.9, { floor: 0.05, power: 1 })).toBeCloseTo(0.15, 12);
  expect(curriculumWeight(0.9, { floor: 0.05, power: 2 })).toBeCloseTo(0.0225, 12);
  expect(curriculumWeight(null, { floor: 0.05, power: 1 })).toBeCloseTo(1.05, 12);
  expect(curriculumWeight(1.3, { floor: 0, power: 1 })).toBe(0);
});

it('samples the categories the previous run did worst on more often', async () => {
  const weak = categories[0];
  const byCategory = Object.fromEntries(
    categories.map((category) => [category, { all: { mean: category === weak ? 0.2 : 0.98 } }]),
  );
  await store.put('previous/stats.json', JSON.stringify({ byCategory }));
  const base = { groups: 400, canonicalShare: 0 };
  const plain = await planGroups(rlInputSchema.parse(base), tasks, 'seed', openObject);
  const input = rlInputSchema.parse({ ...base, curriculum: { statsUri: store.uriOf('previous/stats.json') } });
  const weighted = await planGroups(input, tasks, 'seed', openObject);

  // weak: 0.05 + 1 - 0.2 = 0.85; every other: 0.05 + 1 - 0.98 = 0.07.
  const expected = 0.85 / (0.85 + 0.07 * (categories.length - 1));
  expect(shareOf(weighted.groups, weak)).toBeGreaterThan(expected - 0.08);
  expect(shareOf(weighted.groups, weak)).toBeLessThan(expected + 0.08);
  expect(shareOf(weighted.groups, weak)).toBeGreaterThan(2 * shareOf(plain.groups, weak));
  expect(weighted.curriculum?.weights[weak]).toBeCloseTo(0.85, 12);
  expect(weighted.curriculum?.previousMeans[weak]).toBe(0.2);

  // The same figures inside a manifest's stats read the same way.
  await store.put('previous/manifest.json', JSON.stringify({ stats: { byCategory } }));
  const fromManifest = await planGroups(
    rlInputSchema.parse({ ...base, curriculum: { statsUri: store.uriOf('previous/manifest.json') } }),
    tasks,
    'seed',
    openObject,
  );
  expect(fromManifest.groups.map((group) => group.task.id)).toEqual(weighted.groups.map((group) => group.task.id));
});

it('without a curriculum walks a seeded shuffle of the tasks, and picks round(share * N) canonical groups', async () => {
  const plan = await planGroups(rlInputSchema.parse({ groups: 150, canonicalShare: 0.3 }), tasks, 'seed', openObject);
  const uses = new Map<string, number>();
  for (const group of plan.groups) uses.set(group.task.id, (uses.get(group.task.id) ?? 0) + 1);
  expect(new Set(uses.values())).toEqual(new Set([2, 3]));
  expect(plan.groups.filter((group) => group.canonical)).toHaveLength(45);
  const again = await planGroups(rlInputSchema.parse({ groups: 150, canonicalShare: 0.3 }), tasks, 'seed', openObject);
  expect(again).toEqual(plan);
  const other = await planGroups(
    rlInputSchema.parse({ groups: 150, canonicalShare: 0.3 }),
    tasks,
    'other seed',
    openObject,
  );
  expect(other.groups.map((group) => group.task.id)).not.toEqual(plan.groups.map((group) => group.task.id));
});

it('refuses stats without per-category means, naming the field', async () => {
  await store.put('previous/stats.json', JSON.stringify({ reward: { mean: 0.5 } }));
  const input = rlInputSchema.parse({ curriculum: { statsUri: store.uriOf('previous/stats.json') } });
  await expect(planGroups(input, tasks, 'seed', openObject)).rejects.toThrow(/\[BAD_CURRICULUM_STATS\].*byCategory/);
  const missing = rlInputSchema.parse({ curriculum: { statsUri: store.uriOf('nowhere/stats.json') } });
  await expect(planGroups(missing, tasks, 'seed', openObject)).rejects.toThrow(/\[MISSING_INPUT\]/);
});
