import { BadInputError } from '../../shared/errors';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import type { StageDeps } from './define-stage';
import { readRecordRange, type InputObject } from './stage-inputs';

/** Tasks read from task sets, in order, and the objects read with the sha256 of their bytes (lineage). */
export interface TaskSets {
  tasks: Task[];
  lineage: Array<{ uri: string; sha256: string }>;
}

/**
 * Reads task sets (each line checked against the task schema; a bad line names its URI, line and
 * field) and refuses a task id seen twice across them: trajectory, episode and group ids derive
 * from task ids, so a duplicate would make two different episodes indistinguishable.
 */
export async function readTaskSets(
  objects: readonly InputObject[],
  openObject: StageDeps['openObject'],
): Promise<TaskSets> {
  const tasks: Task[] = [];
  const lineage: TaskSets['lineage'] = [];
  const seen = new Map<string, string>();
  for (const object of objects) {
    const { records, sha256 } = await readRecordRange(openObject, object.uri, taskSchema);
    for (const [index, task] of records.entries()) {
      const where = `${object.uri}: record ${index + 1}`;
      const first = seen.get(task.id);
      if (first !== undefined)
        throw new BadInputError(
          'DUPLICATE_TASK_ID',
          `${where}: id: task id "${task.id}" already appears at ${first}; task ids must be unique across the task sets of one stage`,
        );
      seen.set(task.id, where);
      tasks.push(task);
    }
    lineage.push({ uri: object.uri, sha256 });
  }
  return { tasks, lineage };
}
