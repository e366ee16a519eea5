import type { StageDeps } from '../../queues/stage-kit/define-stage';
import {
  readJsonlBytes,
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
 * JSON or has no id fails too, unless its first bytes name a task no part wants; tasks no trajectory played are not validated here: the collect
 * stage validated them when it wrote them). Lines in the collect stage's own layout give their id
 * from their first bytes (leadingId); only wanted lines and lines of other layouts are decoded
 * and parsed. A part then reads only the objects that
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

const quote = 0x22;
const backslash = 0x5c;
const newline = 0x0a;
/** How every task line this pipeline writes begins (JSON.stringify of a schema-ordered task). */
const schemaVersionKey = Buffer.from('{"schemaVersion":');
const idKey = Buffer.from('"id":"');

/** Whether `expected` stands at `position`, within the line ending at `end`. */
function bytesAt(bytes: Buffer, expected: Buffer, position: number, end: number): boolean {
  return (
    position + expected.length <= end &&
    bytes.compare(expected, 0, expected.length, position, position + expected.length) === 0
  );
}

/**
 * The top-level `id` of a task line read straight from its bytes when the line begins the way the
 * collect stage writes tasks: `{"id":"…"` or `{"schemaVersion":N,"id":"…"` (the key sits at the
 * top level because nothing precedes it but the version number), the id free of escapes.
 * Undefined for any other line, which is then parsed whole. Indexing a 100,000-task run parsed
 * about 1 GB of task JSON in every augment thread only to learn the ids; this reads a few dozen
 * bytes a line.
 */
function leadingId(bytes: Buffer, start: number, end: number): string | undefined {
  let position = start;
  if (bytes[position] !== 0x7b) return undefined;
  if (bytesAt(bytes, schemaVersionKey, position, end)) {
    position += schemaVersionKey.length;
    const digits = position;
    while (position < end && bytes[position] >= 0x30 && bytes[position] <= 0x39) position++;
    if (position === digits || bytes[position] !== 0x2c) return undefined;
    position++;
  } else {
    position++;
  }
  if (!bytesAt(bytes, idKey, position, end)) return undefined;
  const idStart = position + idKey.length;
  for (let cursor = idStart; cursor < end; cursor++) {
    const byte = bytes[cursor];
    if (byte === quote) return bytes.toString('utf8', idStart, cursor);
    if (byte === backslash || byte < 0x20) return undefined;
  }
  return undefined;
}

/** Whether bytes [start, end) are all JSON whitespace (a blank line). */
function isBlank(bytes: Buffer, start: number, end: number): boolean {
  for (let cursor = start; cursor < end; cursor++) {
    const byte = bytes[cursor];
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) return false;
  }
  return true;
}

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

/** Calls `visit(lineIndex, start, end)` for every line of the bytes (split at \n, as a JSONL reader splits). */
function forEachLine(bytes: Buffer, visit: (lineIndex: number, start: number, end: number) => void): void {
  let start = 0;
  for (let lineIndex = 0; start <= bytes.length; lineIndex++) {
    const found = bytes.indexOf(newline, start);
    const end = found === -1 ? bytes.length : found;
    visit(lineIndex, start, end);
    start = end + 1;
  }
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
      const { bytes, sha256 } = await readJsonlBytes(openObject, object.uri);
      // The bytes the manifest lists were written through the task schema (see readRecordRange).
      const schema = sha256 === object.sha256 ? undefined : taskSchema;
      const index: ObjectIndex = { sha256, lines: new Map() };
      forEachLine(bytes, (lineIndex, start, end) => {
        if (isBlank(bytes, start, end)) return;
        const fast = leadingId(bytes, start, end);
        if (fast !== undefined && !wanted.has(fast)) {
          index.lines.set(fast, lineIndex);
          return;
        }
        const line = bytes.toString('utf8', start, end);
        const id = fast ?? idOf(line);
        // Only tasks a part plays are checked against the schema (a line without an id fails here).
        if (id === undefined || wanted.has(id)) {
          const task = parseRecordLine(object.uri, lineIndex, line, schema);
          index.lines.set(task.id, lineIndex);
          found.set(task.id, task);
        } else {
          index.lines.set(id, lineIndex);
        }
      });
      remember(key, index);
      read.push({ uri: object.uri, sha256 });
      continue;
    }
    read.push({ uri: object.uri, sha256: known.sha256 });
    const wantedLines = new Set<number>();
    for (const id of wanted) {
      const line = known.lines.get(id);
      if (line !== undefined) wantedLines.add(line);
    }
    if (wantedLines.size === 0) continue;
    const { bytes, sha256 } = await readJsonlBytes(openObject, object.uri);
    const schema = sha256 === object.sha256 ? undefined : taskSchema;
    // In line order, so a task id on two lines resolves to the later one, as a whole read does;
    // only the wanted lines are decoded.
    forEachLine(bytes, (lineIndex, start, end) => {
      if (!wantedLines.has(lineIndex)) return;
      const task = parseRecordLine(object.uri, lineIndex, bytes.toString('utf8', start, end), schema);
      found.set(task.id, task);
    });
  }
  return { records: found, objects: read };
}
