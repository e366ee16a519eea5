import type { Command } from 'commander';
import { startWorkerPool } from '../../workers/worker-pool';
import type { CliContext } from '../cli-context';
import { positiveInteger } from '../command-support';
import type { RegisterCommand } from './index';

interface WorkerOptions {
  stages?: string;
  concurrency?: number;
  sandbox: boolean;
}

/** Resolves with the first of SIGTERM / SIGINT. */
function nextShutdownSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

/**
 * `hat worker [--stages a,b] [--concurrency n]`: serves stage queues (and `runs`) until SIGTERM or
 * SIGINT, then shuts down within HAT_SHUTDOWN_TIMEOUT_MS: active jobs get that long to finish,
 * after which they are handed back to the queue for another worker.
 */
export const registerWorkerCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('worker')
    .description('run workers for some or all stages (and the runs queue) until SIGTERM/SIGINT')
    .option('--stages <names>', 'comma-separated stage names, "runs" for run jobs; default: every stage and runs')
    .option('--concurrency <n>', 'jobs at once per queue (default: each stage\'s, else HAT_WORKER_CONCURRENCY)', positiveInteger)
    .option('--no-sandbox', 'run CPU-heavy stages in-process instead of sandboxed worker threads')
    .action(async (options: WorkerOptions) => {
      const queues = options.stages
        ?.split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '');
      const shutdown = nextShutdownSignal();
      const pool = await startWorkerPool({
        env: context.env,
        queues,
        concurrency: options.concurrency,
        logger: context.logger,
        sandbox: options.sandbox ? 'auto' : 'off',
      });
      await pool.waitUntilReady();
      context.logger.info({ queues: pool.queues, sandboxed: pool.sandboxed, prefix: pool.context.prefix }, 'worker ready');
      const signal = await shutdown;
      const bound = context.env.HAT_SHUTDOWN_TIMEOUT_MS;
      context.logger.info({ signal, timeoutMs: bound }, 'shutting down');
      const { forced } = await pool.close(bound);
      context.logger.info({ forced }, forced ? 'shut down after handing active jobs back' : 'shut down cleanly');
      // Work that ignored its abort signal (a stuck socket, a busy loop) must not hold the process
      // past the bound: exit once the event loop has had a moment to flush logs.
      setTimeout(() => process.exit(), 1_000).unref();
    });
};
