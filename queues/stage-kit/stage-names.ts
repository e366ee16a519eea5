import { BadInputError } from '../../shared/errors';

/** The queue of run-level parent jobs (`run`) and scheduled kickoffs (`kickoff`). */
export const runsQueueName = 'runs';

/**
 * Stage names double as queue names, object-key segments and job-id parts: lower-case kebab-case,
 * so they never contain BullMQ's `:` separator or a `.` (the job-id separator).
 */
export const stageNamePattern = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;

/** Throws unless the name can serve as a stage (and queue) name. */
export function assertStageName(name: string): string {
  if (!stageNamePattern.test(name) || name === runsQueueName) {
    throw new BadInputError(
      'BAD_STAGE_NAME',
      `stage name "${name}" is not allowed: use lower-case kebab-case (e.g. "collect", "fanout-demo"), and not "${runsQueueName}"`,
    );
  }
  return name;
}
