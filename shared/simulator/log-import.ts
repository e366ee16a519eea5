import { z } from 'zod';
import { unknownFieldPaths } from '../artifacts/record-fields';
import { zodProblems } from '../config/zod-problems';
import { ValidationError, type Problem } from '../errors';
import { shortHash } from '../hash/hash';
import { Rng } from '../random/rng';
import { classifyMessage } from './logs/classify-message';
import { redactPersonalData, type RedactionKind } from './logs/redact-personal-data';
import { expectationsForIntent } from './tasks/expectations';
import { TASK_SCHEMA_VERSION, taskCategories, type Task, type TaskCategory } from './tasks/task-schema';
import { compactText } from './text/normalize-text';
import { roomSnapshotSchema, type RoomSnapshot } from './world/room-snapshot';
import { createWorld } from './world/world';

/**
 * One line of a production live-room log (JSON Lines, UTF-8, optionally gzip), as
 * `hat tasks import` reads it; shared/simulator/LOG_FORMAT.md shows an example.
 *
 * ```ts
 * {
 *   timestamp: string;       // ISO 8601 with offset, when the viewer's comment arrived
 *   room_id: string;         // live room id; must equal room.roomId
 *   room: RoomSnapshot;      // the room state at that moment (shared/simulator/world/room-snapshot.ts):
 *                            // items with SKUs and specs, shops, coupons, shipping rules, after-sales
 *                            // policies, shopping-bag links, campaign timeline, featured item, now
 *   viewer_message: string;  // the viewer's comment, 1-500 characters
 *   agent_reply?: string;    // what the production agent answered (kept, redacted, as a reference)
 *   session_id?: string;     // ignored
 *   viewer_id?: string;      // dropped: never copied into a task
 * }
 * ```
 * Other fields (at any depth, the room's included) are not copied into tasks; the import report
 * names each with the number of lines that had it (`ignoredFields`). Personal data in
 * viewer_message and agent_reply (phone numbers, e-mail, ID and order numbers, names, addresses) is
 * redacted before anything else reads them.
 */
export const productionLogLineSchema = z.object({
  timestamp: z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'must be an ISO 8601 timestamp'),
  room_id: z.string().min(1),
  room: roomSnapshotSchema,
  viewer_message: z.string().trim().min(1).max(500),
  agent_reply: z.string().optional(),
  session_id: z.string().optional(),
  viewer_id: z.string().optional(),
});
export type ProductionLogLine = z.infer<typeof productionLogLineSchema>;

export interface ImportLogsOptions {
  /** Name of the source in task lineage and problem messages. */
  file?: string;
  /** What a malformed line does: skipped and reported (default), or the whole import fails. */
  onBadLine?: 'skip' | 'fail';
  /** Keep at most this many tasks per category (seeded sample); default: keep all. */
  perCategory?: number;
  seed?: string | number;
}

export interface ImportReport {
  lines: number;
  badLines: Problem[];
  duplicates: number;
  /** Lines whose message the classifier could not read (line numbers). */
  unclassified: number[];
  /** Tasks per category before sampling. */
  classified: Partial<Record<TaskCategory, number>>;
  /** Tasks per category after sampling. */
  imported: Partial<Record<TaskCategory, number>>;
  redactions: Partial<Record<RedactionKind, number>>;
  /**
   * Fields of good lines that the log format does not have, so no task carries them: dot-path
   * (array elements as `[]`, e.g. `room.items[].colour`) to the number of lines that had it.
   */
  ignoredFields: Record<string, number>;
}

/** References inside a room that must resolve (a snapshot from a buggy logger is a bad line). */
function roomProblems(room: RoomSnapshot): string[] {
  const problems: string[] = [];
  const items = new Set(room.items.map((item) => item.itemId));
  const rules = new Set(room.shippingRules.map((rule) => rule.ruleId));
  const policies = new Set(room.policies.map((policy) => policy.policyId));
  if (room.featuredItemId !== undefined && !items.has(room.featuredItemId))
    problems.push(`room.featuredItemId ${room.featuredItemId} is not among room.items`);
  room.links.forEach((link, index) => {
    if (!items.has(link.itemId)) problems.push(`room.links[${index}].itemId ${link.itemId} is not among room.items`);
  });
  room.items.forEach((item, index) => {
    if (!rules.has(item.shippingRuleId))
      problems.push(`room.items[${index}].shippingRuleId ${item.shippingRuleId} is not among room.shippingRules`);
    if (!policies.has(item.policyId))
      problems.push(`room.items[${index}].policyId ${item.policyId} is not among room.policies`);
  });
  return problems;
}

function addCounts(
  target: Partial<Record<RedactionKind, number>>,
  counts: Partial<Record<RedactionKind, number>>,
): void {
  for (const [kind, count] of Object.entries(counts) as Array<[RedactionKind, number]>)
    target[kind] = (target[kind] ?? 0) + count;
}

/**
 * Turns production log lines into tasks: parse and check each line, redact personal data,
 * drop duplicates (same message in the same room state), classify the message into a category
 * and intent, compute the expectations from the logged room, and sample per category. With
 * `onBadLine: 'fail'` any malformed line throws one ValidationError listing every bad line.
 */
export async function importProductionLogs(
  lines: Iterable<string> | AsyncIterable<string>,
  options: ImportLogsOptions = {},
): Promise<{ tasks: Task[]; report: ImportReport }> {
  const file = options.file ?? 'logs';
  const report: ImportReport = {
    lines: 0,
    badLines: [],
    duplicates: 0,
    unclassified: [],
    classified: {},
    imported: {},
    redactions: {},
    ignoredFields: {},
  };
  const seen = new Set<string>();
  const tasks: Task[] = [];
  for await (const raw of lines) {
    report.lines++;
    const lineNumber = report.lines;
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      report.badLines.push({ file, line: lineNumber, message: `not valid JSON (${(error as Error).message})` });
      continue;
    }
    const parsed = productionLogLineSchema.safeParse(value);
    if (!parsed.success) {
      report.badLines.push(...zodProblems(parsed.error, file).map((problem) => ({ ...problem, line: lineNumber })));
      continue;
    }
    const line = parsed.data;
    // Logs carry fields of their own (trace ids, client data): not an error, but never dropped unsaid.
    for (const path of new Set(unknownFieldPaths(value, line, Number.POSITIVE_INFINITY).map(withoutIndices)))
      report.ignoredFields[path] = (report.ignoredFields[path] ?? 0) + 1;
    const problems = [
      ...(line.room.roomId !== line.room_id
        ? [`room_id ${line.room_id} differs from room.roomId ${line.room.roomId}`]
        : []),
      ...roomProblems(line.room),
    ];
    if (problems.length > 0) {
      report.badLines.push(...problems.map((message) => ({ file, line: lineNumber, message })));
      continue;
    }

    const message = redactPersonalData(line.viewer_message);
    addCounts(report.redactions, message.counts);
    const reference = line.agent_reply !== undefined ? redactPersonalData(line.agent_reply) : undefined;
    if (reference !== undefined) addCounts(report.redactions, reference.counts);
    const duplicateKey = `${compactText(message.text)}|${shortHash(line.room, 16)}`;
    if (seen.has(duplicateKey)) {
      report.duplicates++;
      continue;
    }
    seen.add(duplicateKey);

    const world = createWorld(line.room);
    const classification = classifyMessage(message.text, world);
    if (classification === undefined) {
      report.unclassified.push(lineNumber);
      continue;
    }
    let expect;
    try {
      expect = expectationsForIntent(world, classification.intent);
    } catch {
      // The message names something the logged room cannot answer for (e.g. a spec it lacks).
      report.unclassified.push(lineNumber);
      continue;
    }
    const turns = [{ message: message.text, intent: classification.intent, expect }];
    tasks.push({
      schemaVersion: TASK_SCHEMA_VERSION,
      id: `${classification.category}-${shortHash({ room: line.room, turns })}`,
      category: classification.category,
      source: {
        kind: 'production_log',
        file,
        line: lineNumber,
        roomId: line.room_id,
        timestamp: line.timestamp,
        ...(reference !== undefined ? { referenceReply: reference.text } : {}),
      },
      room: line.room,
      turns,
    });
    report.classified[classification.category] = (report.classified[classification.category] ?? 0) + 1;
  }

  if (report.badLines.length > 0 && options.onBadLine === 'fail') {
    throw new ValidationError(
      'BAD_LOG_LINES',
      `${file} has malformed lines; fix them or import with --on-bad-line skip`,
      report.badLines,
    );
  }
  const selected =
    options.perCategory === undefined ? tasks : sampleByCategory(tasks, options.perCategory, options.seed ?? 0);
  for (const task of selected) report.imported[task.category] = (report.imported[task.category] ?? 0) + 1;
  return { tasks: selected, report };
}

/** `room.items[3].colour` -> `room.items[].colour`: one entry per field, whichever element had it. */
function withoutIndices(path: string): string {
  return path.replace(/\[\d+\]/g, '[]');
}

/** At most `perCategory` tasks of each category, drawn with a seeded shuffle, kept in log order. */
export function sampleByCategory(tasks: Task[], perCategory: number, seed: string | number): Task[] {
  const keep = new Set<Task>();
  for (const category of taskCategories) {
    const ofCategory = tasks.filter((task) => task.category === category);
    for (const task of new Rng(`log-sample/${seed}/${category}`).sample(ofCategory, perCategory)) keep.add(task);
  }
  return tasks.filter((task) => keep.has(task));
}
