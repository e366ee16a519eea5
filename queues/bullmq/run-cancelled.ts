import type { QueueContext } from './queue-context';

/**
 * Whether `hat runs cancel` marked the run: its parent job (queue `runs`, id = run id) carries
 * `cancelledAt`. Stage, part and handoff jobs check before starting work.
 */
export async function isRunCancelled(context: QueueContext, runId: string): Promise<boolean> {
  const job = await context.runsQueue.getJob(runId);
  const data: unknown = job?.data;
  return (
    typeof data === 'object' && data !== null && typeof (data as { cancelledAt?: unknown }).cancelledAt === 'number'
  );
}
