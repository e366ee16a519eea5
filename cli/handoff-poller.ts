import type { QueueContext } from '../queues/bullmq/queue-context';
import { getRunStatus, type HandoffStatus, type RunStatus } from '../queues/runs/run-control';

/**
 * Polls a run and hands each handoff that waits for a checkpoint to `answer`, one tick at a time
 * (an answer may take minutes; ticks meanwhile queue behind it). A failed tick (a Redis hiccup) is
 * reported and tried again at the next interval. The trainers (simulated, command) keep their own
 * record of what they answered.
 */
export function startHandoffPoller(
  context: QueueContext,
  options: {
    runId: string;
    intervalMs: number;
    answer(handoff: HandoffStatus, status: RunStatus, stopped: () => boolean): Promise<void>;
    onError?(error: Error): void;
  },
): { stop(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const isStopped = () => stopped;
  const tick = async () => {
    const status = await getRunStatus(context, options.runId);
    for (const handoff of status.handoffs ?? []) {
      if (stopped) return;
      if (handoff.state === 'waiting-for-checkpoint') await options.answer(handoff, status, isStopped);
    }
  };
  const timer = setInterval(() => {
    if (stopped) return;
    running = running.then(tick).catch((error: Error) => options.onError?.(error));
  }, options.intervalMs);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
