import type { Command } from 'commander';
import { startMetricsServer } from '../../shared/metrics/prometheus-server';
import { startWorkerPool } from '../../workers/worker-pool';
import type { CliContext } from '../cli-context';
import { portNumber, positiveInteger } from '../command-support';
import type { RegisterCommand } from './index';

interface WorkerOptions {
  stages?: string;
  concurrency?: number;
  sandbox: boolean;
  metricsPort?: number;
  metricsHost: string;
}

/** Resolves with the first of SIGTERM / SIGINT. */
export function nextShutdownSignal(): Promise<NodeJS.Signals> {
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
 * `hat worker [--stages a,b] [--concurrency n] [--metrics-port 9464]`: serves stage queues (and
 * `runs`) until SIGTERM or SIGINT, then shuts down within HAT_SHUTDOWN_TIMEOUT_MS: active jobs get
 * that long to finish, after which they are handed back to the queue for another worker. With
 * `--metrics-port`, Prometheus scrapes `/metrics` there (see shared/metrics/prometheus-worker-metrics.ts).
 */
export const registerWorkerCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('worker')
    .description('run workers for some or all stages (and the runs queue) until SIGTERM/SIGINT')
    .option('--stages <names>', 'comma-separated stage names, "runs" for run jobs; default: every stage and runs')
    .option(
      '--concurrency <n>',
      "jobs at once per queue (default: each stage's, else HAT_WORKER_CONCURRENCY, else the cores for CPU-bound stages and 4 for others)",
      positiveInteger,
    )
    .option('--no-sandbox', 'run CPU-heavy stages in-process instead of sandboxed worker threads')
    .option(
      '--metrics-port <port>',
      'serve Prometheus metrics at http://<host>:<port>/metrics (queue depths, job durations, retries, failures, stage counters)',
      portNumber,
    )
    .option(
      '--metrics-host <host>',
      'address the metrics server listens on (0.0.0.0: every interface, as in a container for a Prometheus scraper)',
      '127.0.0.1',
    )
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
        ...(options.metricsPort !== undefined ? { metrics: { processMetrics: true } } : {}),
      });
      let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
      try {
        await pool.waitUntilReady();
        if (pool.metrics && options.metricsPort !== undefined) {
          metricsServer = await startMetricsServer(pool.metrics, {
            port: options.metricsPort,
            host: options.metricsHost,
            logger: context.logger,
          });
        }
      } catch (error) {
        await pool.close(context.env.HAT_SHUTDOWN_TIMEOUT_MS);
        throw error;
      }
      context.logger.info(
        { queues: pool.queues, sandboxed: pool.sandboxed, prefix: pool.context.prefix, metrics: metricsServer?.url },
        'worker ready',
      );
      const signal = await shutdown;
      const bound = context.env.HAT_SHUTDOWN_TIMEOUT_MS;
      context.logger.info({ signal, timeoutMs: bound }, 'shutting down');
      // Metrics stay up while jobs drain, so the last scrape sees the shutdown.
      const { forced } = await pool.close(bound);
      await metricsServer?.close();
      context.logger.info({ forced }, forced ? 'shut down after handing active jobs back' : 'shut down cleanly');
      // Work that ignored its abort signal (a stuck socket, a busy loop) must not hold the process
      // past the bound: exit once the event loop has had a moment to flush logs.
      setTimeout(() => process.exit(), 1_000).unref();
    });
};
