import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Job, Queue } from 'bullmq';
import type { RedisClient } from './redis-connection';

/**
 * Which active jobs have lost their worker, and when BullMQ will hand them to another one.
 *
 * A worker holds a lock on each job it runs (`<queue>:<id>:lock`, renewed every half lock) and a
 * named blocking connection (`<prefix>:<base64 queue>:w:<worker name>`, BullMQ's own naming, which
 * `Queue.getWorkers()` reads from CLIENT LIST). Each job records the name of the worker that took
 * it (`processedBy`). So an active job whose worker has no connection any more lost its worker at
 * once (a SIGKILL closes the sockets), long before its lock lapses; an active job without a lock
 * lost a worker that is still connected but stopped renewing (paused, hung). BullMQ's stalled
 * check (every stalled interval, run by any live worker of the queue) moves an active job that
 * has no lock and that the previous check already marked (the `stalled` set) back to the wait list.
 */

/** BullMQ's default stalled interval (`stalledInterval`), ms. */
export const defaultStalledIntervalMs = 30_000;

/**
 * A name for one BullMQ Worker: host, process and a random tag, so a restarted container with
 * the same host name and pid is not mistaken for the worker it replaced. BullMQ stores it on each
 * job the worker takes and names the worker's blocking connection after it.
 */
export function uniqueWorkerName(): string {
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, '-') || 'host';
  return `${host}.${process.pid}.${randomBytes(3).toString('hex')}`;
}

export interface StalledJob {
  jobId: string;
  /** `worker-lost`: its worker has no connection to Redis any more (killed); `lock-lapsed`: its worker is connected but let the lock lapse (paused, hung). */
  cause: 'worker-lost' | 'lock-lapsed';
  /** The worker that held it. */
  worker?: string;
  /**
   * In about how long the stalled check hands it back to the queue, ms (0: at the next check,
   * now). Absent when no running worker serves the queue (none, or only stalled ones): nothing
   * hands it back until one starts.
   */
  handBackInMs?: number;
}

/**
 * When the stalled check hands a job back, ms from now: at the first check (the next one in
 * `nextCheckInMs`, then one every `intervalMs`) that finds its lock gone (`lockLeftMs`) and the
 * job `marked` by the check before (each check marks every active job; a live worker's lock
 * renewal unmarks its own).
 */
export function handBackInMs(options: {
  lockLeftMs: number;
  marked: boolean;
  nextCheckInMs: number;
  intervalMs: number;
}): number {
  let at = options.nextCheckInMs + (options.marked ? 0 : options.intervalMs);
  if (at < options.lockLeftMs) at += Math.ceil((options.lockLeftMs - at) / options.intervalMs) * options.intervalMs;
  return at;
}

/** The worker names connected to a queue, or undefined when Redis does not list its clients (some managed services). */
async function connectedWorkers(queue: Queue): Promise<Set<string> | undefined> {
  try {
    const clients = (await queue.getWorkers()) as Array<{ rawname?: string }>;
    const names = new Set<string>();
    for (const client of clients) {
      // BullMQ answers a refused CLIENT LIST with one placeholder entry without a raw name.
      if (client.rawname === undefined) return undefined;
      const at = client.rawname.indexOf(':w:');
      names.add(at < 0 ? '' : client.rawname.slice(at + 3));
    }
    return names;
  } catch {
    return undefined;
  }
}

/**
 * The stalled jobs among `jobs` (active jobs of `queue`), with when each is handed back.
 * `stalledIntervalMs`: the workers' stalled interval when the last check's key does not tell it.
 */
export async function findStalledJobs(
  connection: RedisClient,
  queue: Queue,
  jobs: readonly Job[],
  options: { stalledIntervalMs?: number; now?: () => number } = {},
): Promise<StalledJob[]> {
  if (jobs.length === 0) return [];
  const base = queue.qualifiedName;
  const [workers, checkTtl, lastCheck, held] = await Promise.all([
    connectedWorkers(queue),
    connection.pttl(`${base}:stalled-check`),
    connection.get(`${base}:stalled-check`),
    Promise.all(
      jobs.map(async (job) => {
        const id = job.id ?? '';
        const [lockTtl, marked] = await Promise.all([
          connection.pttl(`${base}:${id}:lock`),
          connection.sismember(`${base}:stalled`, id),
        ]);
        return { job, id, lockTtl, marked: marked === 1 };
      }),
    ),
  ]);
  const now = (options.now ?? Date.now)();
  // The check key lives one stalled interval from the last check (PX), and holds that check's time.
  const lastCheckAt = lastCheck === null ? Number.NaN : Number(lastCheck);
  const interval =
    checkTtl > 0 && Number.isFinite(lastCheckAt) && now - lastCheckAt >= 0
      ? now - lastCheckAt + checkTtl
      : (options.stalledIntervalMs ?? defaultStalledIntervalMs);
  const nextCheckInMs = Math.max(0, checkTtl);
  // A worker that let a lock lapse is connected but not running (paused, hung): it runs no stall
  // checks either, so it does not count as a worker that will hand the job back.
  const live = workers === undefined ? undefined : new Set(workers);
  for (const { job, lockTtl } of held)
    if (lockTtl === -2 && job.processedBy !== undefined) live?.delete(job.processedBy);
  const stalled: StalledJob[] = [];
  for (const { job, id, lockTtl, marked } of held) {
    const worker = job.processedBy;
    const workerLost = workers !== undefined && worker !== undefined && !workers.has(worker);
    const lockLapsed = lockTtl === -2;
    if (!workerLost && !lockLapsed) continue;
    const served = live === undefined || live.size > 0;
    const wait = handBackInMs({ lockLeftMs: Math.max(0, lockTtl), marked, nextCheckInMs, intervalMs: interval });
    stalled.push({
      jobId: id,
      cause: workerLost ? 'worker-lost' : 'lock-lapsed',
      ...(worker !== undefined ? { worker } : {}),
      ...(served ? { handBackInMs: wait } : {}),
    });
  }
  return stalled;
}
