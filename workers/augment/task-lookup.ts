import type { StageDeps } from '../../queues/stage-kit/define-stage';
import {
  readJsonlLines,
  parseRecordLine,
  readKeyedRecords,
  type InputObject,
} from '../../queues/stage-kit/stage-inputs';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';

/**
 * The tasks an augment part's trajectories played, without reading every task of the run for
 * every part. The tasks input of a nightly run is the collect stage's whole task list (100,000
 * tasks in 100 objects) and each part needs the 1,000 its trajectories played: reading and
 * validating all of them per part made augment quadratic in the run size (17 ms per trajectory
 * at 100k, against 1-2 ms for the work itself).
 *
 * A worker process (or sandbox thread) indexes each listed task object once: it reads every
 * line, remembers which line holds which task id and the object's sha256, and checks the tasks
 * it wants against the schema (a bad one fails with the same error as before; a line that is not
 * JSON or has no id fails too; tasks no trajectory played are no longer validated here: the
 * collect stage validated them when it wrote them). A part then reads only the objects that
 * hold tasks it wants and parses only those lines. Objects are
 * indexed under their URI and the sha256 the manifest lists, so a rewritten object is a new
 * entry; objects a manifest does not describe (a direct URI) are read whole every time.
 */

interface ObjectIndex {
  /** sha256 of the stored bytes when indexed (lineage). */
  sha256: string;
  /** Task id → 0-based line of the object. */
  lines: Map<string, number>;
}

const indexes = new Map<string, ObjectIndex>();
/** Objects indexed per process: a task id is ~40 bytes, so 4,096 objects of 1,000 tasks stay near 200 MB at worst. */
const indexLimit = 4096;

/** The `id` of a JSON line, undefined when it is not JSON or has no string id. */
function idOf(line: string): string | undefined {
  try {
    const value = JSON.parse(line) as { id?: unknown } | null;
    return value !== null && typeof value === 'object' && typeof value.id === 'string' ? value.id : undefined;
  } catch {
    return undefined;
  }
}

function remember(key: string, index: ObjectIndex): void {
  if (indexes.size >= indexLimit) indexes.delete(indexes.keys().next().value as string);
  indexes.set(key, index);
}

/**
 * Every wanted task found in `objects` (a later object wins for an id listed twice, as before)
 * and every object with the sha256 of its bytes, for the part's lineage.
 */
export async function readWantedTasks(
  objects: readonly InputObject[],
  openObject: StageDeps['openObject'],
  wanted: ReadonlySet<string>,
): Promise<{ records: Map<string, Task>; objects: Array<{ uri: string; sha256: string }> }> {
  const found = new Map<string, Task>();
  const read: Array<{ uri: string; sha256: string }> = [];
  for (const object of objects) {
    if (object.sha256 === undefined) {
      const whole = await readKeyedRecords([object], openObject, taskSchema, (task) => task.id, wanted);
      for (const [id, task] of whole.records) found.set(id, task);
      read.push(...whole.objects);
      continue;
    }
    const key = `${object.uri}#${object.sha256}`;
    const known = indexes.get(key);
    if (known === undefined) {
      const { lines, sha256 } = await readJsonlLines(openObject, object.uri);
      const index: ObjectIndex = { sha256, lines: new Map() };
      for (const [lineIndex, line] of lines.entries()) {
        if (line.trim() === '') continue;
        const id = idOf(line);
        // Only tasks a part plays are checked against the schema (a line without an id fails here).
        if (id === undefined || wanted.has(id)) {
          const task = parseRecordLine(object.uri, lineIndex, line, taskSchema);
          index.lines.set(task.id, lineIndex);
          found.set(task.id, task);
        } else {
          index.lines.set(id, lineIndex);
        }
      }
      remember(key, index);
      read.push({ uri: object.uri, sha256 });
      continue;
    }
    read.push({ uri: object.uri, sha256: known.sha256 });
    const wantedLines: number[] = [];
    for (const id of wanted) {
      const line = known.lines.get(id);
      if (line !== undefined) wantedLines.push(line);
    }
    if (wantedLines.length === 0) continue;
    const { lines } = await readJsonlLines(openObject, object.uri);
    // In line order, so a task id on two lines resolves to the later one, as a whole read does.
    for (const lineIndex of wantedLines.sort((a, b) => a - b)) {
      const task = parseRecordLine(object.uri, lineIndex, lines[lineIndex], taskSchema);
      found.set(task.id, task);
    }
  }
  return { records: found, objects: read };
}
