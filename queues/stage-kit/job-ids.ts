import { BadInputError } from '../../shared/errors';

/**
 * Deterministic BullMQ job ids. BullMQ reserves `:` (its key separator) and integers (its own
 * generated ids), so ids join their parts with `.` and always contain a letter. The same
 * (run, stage, part, input) always gives the same id, which makes re-enqueueing a no-op.
 */

/**
 * The names BullMQ gives its own keys of a queue (`<prefix>:runs:<name>`). A run's job id is the
 * run id, so its key `<prefix>:runs:<runId>` must not be one of them: a run named `stalled` or
 * `paused` would write its job hash over BullMQ's set or list (WRONGTYPE on every later command).
 */
export const reservedRunIds = [
  'wait',
  'active',
  'paused',
  'delayed',
  'prioritized',
  'completed',
  'failed',
  'stalled',
  'stalled-check',
  'waiting-children',
  'id',
  'meta',
  'events',
  'limiter',
  'repeat',
  'marker',
  'metrics',
  'pc',
  'de',
];

/** Run ids: letters, digits, `.`, `_`, `-`; not only digits; at most 100 characters; none of reservedRunIds. */
export const runIdPattern = new RegExp(
  `^(?!\\d+$)(?!(?:${reservedRunIds.join('|')})$)[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`,
);

/** What a run id may be, for error messages. */
export const runIdRule = `use letters, digits, ".", "_" and "-" (at most 100, not only digits, not one of BullMQ's key names: ${reservedRunIds.join(', ')})`;

export function assertRunId(runId: string): string {
  if (!runIdPattern.test(runId)) {
    throw new BadInputError('BAD_RUN_ID', `run id "${runId}" is not allowed: ${runIdRule}`);
  }
  return runId;
}

/** Throws when BullMQ would reject or misread the id. */
export function assertJobId(id: string): string {
  if (id.includes(':') || /^\d+$/.test(id) || id.length === 0) {
    throw new BadInputError('BAD_JOB_ID', `job id "${id}" is not allowed: it must not contain ":" or be an integer`);
  }
  return id;
}

/** The run's parent job id is the run id itself, so `hat runs show <id>` needs no lookup. */
export function runJobId(runId: string): string {
  return assertJobId(assertRunId(runId));
}

export function stageJobId(runId: string, stage: string, inputHash: string): string {
  return assertJobId(`${runId}.${stage}.${inputHash.slice(0, 12)}`);
}

/** `part-00042`: the part's name in job ids, object keys and logs. */
export function partIdOf(index: number): string {
  return `part-${String(index).padStart(5, '0')}`;
}

/** The part id (`part-00042`) inside a part's job id, or undefined for other jobs. */
export function partIdOfJobId(jobId: string): string | undefined {
  return /\.(part-\d{5,})\.[0-9a-f]{12}$/.exec(jobId)?.[1];
}

export function partJobId(runId: string, stage: string, index: number, partInputHash: string): string {
  return assertJobId(`${runId}.${stage}.${partIdOf(index)}.${partInputHash.slice(0, 12)}`);
}

/** `<run>.<stage>.fan-in-00001.<hash>`: one task of a stage's fan-in. */
export function fanInTaskJobId(runId: string, stage: string, index: number, taskHash: string): string {
  return assertJobId(`${runId}.${stage}.fan-in-${String(index).padStart(5, '0')}.${taskHash.slice(0, 12)}`);
}

/** `run-20250131T020000Z-1a2b3c4d`: a run id from the config hash and a time (UTC, to the second). */
export function deriveRunId(configHash: string, at: Date, label = 'run'): string {
  return assertRunId(`${label}-${compactUtc(at)}-${configHash.slice(0, 8)}`);
}

/** `20250131T020000Z`. */
export function compactUtc(at: Date): string {
  return at
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/** A BullMQ job key `<prefix>:<queue>:<id>` split into queue and id (our prefixes contain no `:`). */
export function parseJobKey(key: string): { queue: string; id: string } | undefined {
  const first = key.indexOf(':');
  const second = key.indexOf(':', first + 1);
  return first < 0 || second < 0 ? undefined : { queue: key.slice(first + 1, second), id: key.slice(second + 1) };
}
