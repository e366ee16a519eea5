import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { BadInputError } from '../../shared/errors';
import { generateTasksOf } from '../../shared/simulator/tasks/task-generator';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { expandInputs, isManifestUri, type InputObject } from '../../queues/stage-kit/stage-inputs';
import { readTaskSets } from '../../queues/stage-kit/task-inputs';
import { asArtifactUri } from '../../shared/artifacts/artifact-uri';
import type { CollectInput } from './collect-contract';

/** The tasks a collect stage plays, in order, and the inputs they were read from. */
export interface CollectTasks {
  tasks: Task[];
  /** Task sets read, with the sha256 of their stored bytes (empty for generated tasks). */
  lineage: Array<{ uri: string; sha256: string }>;
}

/**
 * Reads every task set the config names (each line checked against the task schema; a bad line
 * is reported with its URI, line and field) or generates the tasks, and refuses a set where a
 * task id appears twice: trajectory ids are derived from task ids, so a duplicate would make two
 * different episodes indistinguishable.
 */
export async function loadCollectTasks(
  input: Pick<CollectInput, 'tasks' | 'inputs'> & { generate?: CollectInput['generate'] & { start?: number } },
  openObject: StageDeps['openObject'],
): Promise<CollectTasks> {
  if (input.generate !== undefined) return { tasks: generateTasksOf(input.generate, 'collect.generate'), lineage: [] };
  const field = input.tasks !== undefined ? 'tasks' : 'inputs';
  const uris = (input.tasks ?? input.inputs ?? []).map(asArtifactUri);
  const objects: InputObject[] = [];
  for (const uri of uris) {
    const { store, key } = openObject(uri);
    if (!(await store.head(key))) {
      throw new BadInputError(
        'MISSING_INPUT',
        `collect.${field}: ${uri} does not exist; check the path, or write a task set there with \`hat tasks generate --out ${uri}\``,
      );
    }
    // A collect manifest stands for the task slices it lists: play the same tasks again.
    objects.push(
      ...(isManifestUri(uri) ? await expandInputs([uri], openObject, `collect.${field}`, 'tasks') : [{ uri }]),
    );
  }
  const { tasks, lineage } = await readTaskSets(objects, openObject);
  if (tasks.length === 0)
    throw new BadInputError(
      'NO_TASKS',
      `collect.${field}: ${uris.join(', ')} hold no tasks; generate some with \`hat tasks generate\``,
    );
  return { tasks, lineage };
}
