import type { Job } from 'bullmq';
import type { HatEnv } from '../../shared/config/env';
import { BadInputError, type Problem } from '../../shared/errors';
import type { KickoffJobData } from './run-job-data';
import { compactUtc } from '../stage-kit/job-ids';
import { checkJobData, runJobOptions } from '../bullmq/job-options';
import type { QueueContext } from '../bullmq/queue-context';
import { planRun, type ProblemLocator } from './run-config';

/**
 * Nightly (or any cron) runs through BullMQ job schedulers on the `runs` queue, all upserted from
 * here. Each firing adds a `kickoff` job carrying the run config; the run worker plans the run
 * with an id derived from the scheduled time (`<schedule>-<UTC time>`), so a retried or
 * duplicated kickoff finds the run already there and starts nothing twice.
 */

export const scheduleNamePattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** `nightly-20250131T020000Z`. */
export function scheduledRunId(schedule: string, scheduledAt: Date): string {
  return `${schedule}-${compactUtc(scheduledAt)}`;
}

/**
 * The time a scheduler job was due: BullMQ records it as `prevMillis` (and in the job id,
 * `repeat:<scheduler>:<millis>`); a job added by hand falls back to its timestamp plus delay.
 */
export function scheduledAtOf(job: Pick<Job, 'id' | 'opts' | 'timestamp' | 'delay'>): Date {
  const previous = (job.opts as { prevMillis?: unknown }).prevMillis;
  if (typeof previous === 'number' && previous > 0) return new Date(previous);
  const fromId = /^repeat:.+:(\d+)$/.exec(job.id ?? '')?.[1];
  if (fromId) return new Date(Number(fromId));
  return new Date(job.timestamp + (job.delay ?? 0));
}

export interface ScheduleSpec {
  name: string;
  cron: string;
  /** IANA time zone, e.g. `Europe/Berlin`. */
  tz: string;
  /** The run config as parsed from YAML. */
  config: unknown;
  configFile?: string;
  locator?: ProblemLocator;
  /** Told of each deprecated spelling the config uses (the CLI prints a warning; every firing reads it the same way). */
  onDeprecatedSpelling?: (warning: Problem) => void;
}

export interface ScheduleInfo {
  name: string;
  cron?: string;
  tz?: string;
  /** Next firing, ISO-8601. */
  next?: string;
  configFile?: string;
  stages: string[];
}

function assertTimeZone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new BadInputError(
      'BAD_TIMEZONE',
      `--tz "${tz}" is not a known IANA time zone; use a name such as Europe/Berlin or UTC`,
    );
  }
}

/** Creates or replaces a schedule after validating its name, zone, cron and run config. */
export async function setSchedule(
  context: QueueContext,
  spec: ScheduleSpec,
  env: Pick<HatEnv, 'HAT_ARTIFACTS'>,
  now: Date,
): Promise<ScheduleInfo> {
  if (!scheduleNamePattern.test(spec.name)) {
    throw new BadInputError(
      'BAD_SCHEDULE_NAME',
      `schedule name "${spec.name}" is not allowed: use lower-case letters, digits and "-" (it becomes part of run ids)`,
    );
  }
  assertTimeZone(spec.tz);
  // The same validation a firing will do, so a broken config fails now, not at 2 am.
  const plan = planRun(spec.config, {
    env,
    now,
    runId: scheduledRunId(spec.name, now),
    source: `schedule:${spec.name}`,
    file: spec.configFile,
    locator: spec.locator,
    ...(spec.onDeprecatedSpelling ? { onDeprecatedSpelling: spec.onDeprecatedSpelling } : {}),
  });
  const data: KickoffJobData = {
    v: 1,
    schedule: spec.name,
    config: spec.config,
    ...(spec.configFile ? { configFile: spec.configFile } : {}),
  };
  checkJobData(data, context.env.HAT_JOB_DATA_LIMIT, { label: `schedule "${spec.name}"` });
  const { sizeLimit: _sizeLimit, ...options } = runJobOptions(context.env.HAT_JOB_DATA_LIMIT);
  try {
    await context.runsQueue.upsertJobScheduler(
      spec.name,
      { pattern: spec.cron, tz: spec.tz },
      { name: 'kickoff', data, opts: options },
    );
  } catch (error) {
    if (error instanceof BadInputError) throw error;
    throw new BadInputError(
      'BAD_CRON',
      `--cron "${spec.cron}" was refused (${(error as Error).message}); use five fields, e.g. "0 2 * * *" for 02:00 daily`,
      { cause: error },
    );
  }
  const info = (await listSchedules(context)).find((schedule) => schedule.name === spec.name);
  return info ?? { name: spec.name, cron: spec.cron, tz: spec.tz, stages: plan.stages.map((stage) => stage.name) };
}

export async function listSchedules(context: QueueContext): Promise<ScheduleInfo[]> {
  const schedulers = await context.runsQueue.getJobSchedulers(0, -1, true);
  return schedulers
    .map((scheduler) => {
      const data = scheduler.template?.data as Partial<KickoffJobData> | undefined;
      const stages =
        data?.config && typeof data.config === 'object'
          ? Object.keys((data.config as { stages?: object }).stages ?? {})
          : [];
      return {
        name: scheduler.id ?? scheduler.key,
        ...(scheduler.pattern ? { cron: scheduler.pattern } : {}),
        ...(scheduler.tz ? { tz: scheduler.tz } : {}),
        ...(scheduler.next ? { next: new Date(scheduler.next).toISOString() } : {}),
        ...(data?.configFile ? { configFile: data.configFile } : {}),
        stages,
      };
    })
    .sort((left, right) => left.name.localeCompare(right.name));
}

export async function removeSchedule(context: QueueContext, name: string): Promise<void> {
  const removed = await context.runsQueue.removeJobScheduler(name);
  if (!removed) throw new BadInputError('SCHEDULE_NOT_FOUND', `no schedule named "${name}"; see \`hat schedule list\``);
}
