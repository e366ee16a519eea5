import { InvalidArgumentError } from 'commander';
import { formatProblem, type Problem } from '../shared/errors';
import type { CliContext } from './cli-context';
import { openQueueContext, type QueueContext } from '../queues/bullmq/queue-context';
import type { RedisRole } from '../queues/bullmq/redis-connection';
import { registerCatalogStages } from '../workers/stage-catalog';

/** Option parser for positive integers (commander reports a bad value as bad usage, exit 2). */
export function positiveInteger(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError('must be a positive integer');
  return parsed;
}

/** Option parser for TCP ports, 1-65535 (bad usage, exit 2, otherwise). */
export function portNumber(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > 65_535)
    throw new InvalidArgumentError('must be a port number (1-65535)');
  return parsed;
}

/** Runs `work` with a producer queue context (stages registered), always closing it. */
export async function withQueues<T>(
  context: CliContext,
  work: (queues: QueueContext) => Promise<T>,
  options: { role?: RedisRole } = {},
): Promise<T> {
  registerCatalogStages();
  const queues = await openQueueContext(context.env, {
    connectionName: 'hat-cli',
    ...(options.role ? { role: options.role } : {}),
  });
  try {
    return await work(queues);
  } finally {
    await queues.close();
  }
}

/**
 * Prints a config warning (a deprecated spelling, with file, line and path) on stderr as
 * `warning: ...`, once per line however often planning meets it (every round of a stage, every
 * check of a held-back one), as it is met: it still shows when the config is then refused.
 */
export function configWarnings(context: CliContext): (warning: Problem) => void {
  const printed = new Set<string>();
  return (warning) => {
    const line = formatProblem(warning);
    if (printed.has(line)) return;
    printed.add(line);
    context.stderr.write(`warning: ${line}\n`);
  };
}
