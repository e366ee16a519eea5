import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { BadInputError } from '../../shared/errors';
import { Rng } from '../../shared/random/rng';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { expandInputs } from '../../queues/stage-kit/stage-inputs';
import { readTaskSets } from '../../queues/stage-kit/task-inputs';
import { asArtifactUri } from '../../shared/artifacts/artifact-uri';
import { readCurriculum, type CurriculumWeights } from './curriculum';
import { generateTasksOf, type TaskGenerator } from '../../shared/simulator/tasks/task-generator';
import type { RlInput } from './rl-contract';

/** One planned group: the task its G episodes play and whether they play it under the canonical harness. */
export const rlGroupSchema = z.object({
  groupIndex: z.number().int().nonnegative(),
  canonical: z.boolean(),
  task: taskSchema,
});
export type RlGroup = z.infer<typeof rlGroupSchema>;

/** Schema version of the group plan (`groups.jsonl.gz`). */
export const RL_GROUPS_SCHEMA_VERSION = 1;

export interface LoadedTasks {
  tasks: Task[];
  /** Every task file read, with the sha256 of its bytes. */
  lineage: Array<{ uri: string; sha256: string }>;
}

/** Tasks generated when the config names no task set. */
export const defaultRlTasks: TaskGenerator = { count: 64, seed: 'rl' };

/**
 * The task set of the config: task files (`tasks` and `inputs`; manifests expand to the JSONL
 * objects they list) or generated tasks (`generate`, else 64 with seed "rl"); task ids must be
 * unique, since episode and group ids derive from them.
 */
export async function loadRlTasks(
  input: Pick<RlInput, 'tasks' | 'inputs' | 'generate' | 'taskLimit'>,
  openObject: StageDeps['openObject'],
): Promise<LoadedTasks> {
  const tasks: Task[] = [];
  const lineage: LoadedTasks['lineage'] = [];
  const uris = [...(input.tasks ?? []), ...input.inputs].map(asArtifactUri);
  if (uris.length === 0) {
    tasks.push(...generateTasksOf(input.generate ?? defaultRlTasks, 'rl.generate'));
  }
  if (uris.length > 0) {
    const read = await readTaskSets(await expandInputs(uris, openObject, 'rl.tasks', 'tasks'), openObject);
    tasks.push(...read.tasks);
    lineage.push(...read.lineage);
  }
  const limited = tasks.slice(0, input.taskLimit ?? tasks.length);
  if (limited.length === 0)
    throw new BadInputError(
      'NO_TASKS',
      `rl.tasks: ${uris.join(', ')} hold no tasks; generate some with \`hat tasks generate\``,
    );
  return { tasks: limited, lineage };
}

export interface GroupPlan {
  groups: RlGroup[];
  curriculum?: CurriculumWeights;
}

/**
 * Assigns a task to every group and picks the canonical groups, all from `seed`:
 * - without a curriculum, groups walk a seeded shuffle of the task set (every task is used
 *   floor(N/T) or ceil(N/T) times);
 * - with one, each group draws a category by the curriculum weights and walks a seeded shuffle
 *   of that category's tasks;
 * - round(canonicalShare * N) groups, drawn without replacement, use the canonical harness.
 */
export async function planGroups(
  input: RlInput,
  tasks: readonly Task[],
  seed: string,
  openObject: StageDeps['openObject'],
): Promise<GroupPlan> {
  const root = new Rng(seed).fork('rl/plan');
  const count = input.groups;
  const assigned: Task[] = [];
  let curriculum: CurriculumWeights | undefined;
  if (input.curriculum) {
    const byCategory = new Map<string, Task[]>();
    for (const task of tasks) byCategory.set(task.category, [...(byCategory.get(task.category) ?? []), task]);
    const categories = [...byCategory.keys()].sort();
    curriculum = await readCurriculum(input.curriculum, categories, openObject);
    const orders = new Map(
      categories.map((category) => [category, root.fork(`order/${category}`).shuffle(byCategory.get(category)!)]),
    );
    const used = new Map<string, number>();
    const draws = root.fork('categories');
    const weights = categories.map((category) => curriculum!.weights[category]);
    for (let index = 0; index < count; index++) {
      const category = draws.weighted(categories, weights);
      const order = orders.get(category)!;
      const position = used.get(category) ?? 0;
      used.set(category, position + 1);
      assigned.push(order[position % order.length]);
    }
  } else {
    const order = root.fork('order').shuffle(tasks);
    for (let index = 0; index < count; index++) assigned.push(order[index % order.length]);
  }
  const canonicalCount = Math.round(input.canonicalShare * count);
  const indices = Array.from({ length: count }, (_, index) => index);
  const canonical = new Set(
    canonicalCount === count ? indices : root.fork('canonical').sample(indices, canonicalCount),
  );
  return {
    groups: assigned.map((task, groupIndex) => ({ groupIndex, canonical: canonical.has(groupIndex), task })),
    ...(curriculum ? { curriculum } : {}),
  };
}
