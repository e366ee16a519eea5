import type { KeepJobs } from 'bullmq';
import { HatError } from '../../shared/errors';
import { runRetention, stageRetention } from './job-options';

/** Redis's answer to a write when `used_memory` is over `maxmemory` under the `noeviction` policy. */
const outOfMemory = /^OOM command not allowed/;
/** A MULTI whose queued commands were refused; ioredis lists them as `previousErrors`. */
const transactionAborted = /^EXECABORT/;

interface RedisReply {
  message: string;
  command?: { name?: string };
  previousErrors?: RedisReply[];
}

function isReply(value: unknown): value is RedisReply {
  return value instanceof Error || (typeof value === 'object' && value !== null && 'message' in value);
}

/** The refused commands, upper case, without repeats (`EVAL`, `SET, INCR`). */
function refusedCommands(reply: RedisReply): string {
  const replies = reply.previousErrors?.length ? reply.previousErrors : [reply];
  const names = [...new Set(replies.map((item) => item.command?.name?.toUpperCase()).filter(Boolean))];
  return names.length > 0 ? names.join(', ') : 'a write';
}

const days = (keep: KeepJobs) => `${Math.round(('age' in keep ? (keep.age ?? 0) : 0) / 86_400)} days`;

/** What to run, with the pipeline's own part: what its finished jobs hold and for how long. */
const nextSteps =
  '`redis-cli INFO memory` shows the use, `redis-cli CONFIG SET maxmemory <bytes>` raises it (and `CONFIG REWRITE` keeps it), ' +
  '`redis-cli --bigkeys` finds the largest keys; finished jobs are kept ' +
  `${days(stageRetention.completed)} (completed) and ${days(stageRetention.failed)} (failed), runs ${days(runRetention.completed)}: ` +
  '`hat runs list` shows the runs Redis holds';

/**
 * `[REDIS_FULL]` for a Redis that refuses writes because it is out of memory (`OOM command not
 * allowed`, or `EXECABORT` for a transaction whose commands were refused that way), naming the
 * refused command and what to do; undefined for every other error. Retryable: once memory is freed
 * the same work succeeds.
 */
export function redisFullError(error: unknown): HatError | undefined {
  if (HatError.isInstance(error) || !isReply(error) || typeof error.message !== 'string') return undefined;
  const aborted = transactionAborted.test(error.message);
  const full =
    outOfMemory.test(error.message) ||
    (aborted &&
      (error.previousErrors === undefined || error.previousErrors.some((item) => outOfMemory.test(item.message))));
  if (!full) return undefined;
  const answer = error.previousErrors?.find((item) => outOfMemory.test(item.message)) ?? error;
  return new HatError(
    'REDIS_FULL',
    `Redis is out of memory and refused ${refusedCommands(error)}${aborted ? ' (the whole transaction was discarded)' : ''}: "${answer.message.split('\n')[0]}"; raise maxmemory or free keys, then run the command again: ${nextSteps}`,
    { retryable: true, cause: error },
  );
}
