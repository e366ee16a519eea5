import type { Command } from 'commander';
import { watchRun } from '../../queues/runs/run-control';
import { HatError } from '../../shared/errors';
import type { CliContext } from '../cli-context';
import { withQueues } from '../command-support';
import { startTrainerSession } from '../trainer-session';
import type { RegisterCommand } from './index';

interface TrainOptions {
  anyExecutor?: boolean;
  serve: boolean;
  outDir?: string;
}

/**
 * `hat train <runId> [--any-executor] [--no-serve]`: the `command` executor for a run enqueued
 * elsewhere (`hat run` without --wait, the nightly schedule): answers each of its handoffs whose
 * `trainer.executor` is `command` (every handoff with --any-executor) with the pipeline's trainer
 * (trainer/) on this machine, serves each checkpoint here and registers it, until the run ends.
 */
export const registerTrainCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('train')
    .description(
      "answer a run's trainer handoffs with the pipeline's trainer (trainer/) on this machine, until the run ends",
    )
    .argument('<runId>', 'run id')
    .option('--any-executor', 'answer every handoff, not only those with trainer.executor: command')
    .option('--no-serve', 'register each checkpoint by its model directory only (no `hat serve` here)')
    .option(
      '--out-dir <dir>',
      'where trained checkpoints go: <dir>/<runId>/<handoff>-<request sha256>/',
      '.hat/trained',
    )
    .action(async (runId: string, options: TrainOptions) => {
      await withQueues(
        context,
        async (queues) => {
          const trainer = startTrainerSession(queues, {
            runId,
            env: context.env,
            environment: context.environment,
            ...(options.anyExecutor ? { executors: 'all' as const } : {}),
            serve: options.serve,
            ...(options.outDir ? { workDir: options.outDir } : {}),
            log: (line) => context.stderr.write(`${line}\n`),
          });
          let state: string;
          try {
            const status = await watchRun(queues, runId, { intervalMs: 1_000 });
            state = status.state;
          } finally {
            await trainer.stop();
          }
          context.stderr.write(`run ${runId} ${state}\n`);
          if (state !== 'completed')
            throw new HatError('RUN_FAILED', `run ${runId} ${state}; see \`hat runs show ${runId}\``);
        },
        { role: 'watcher' },
      );
    });
};
