import type { Command } from 'commander';
import { formatProblem } from '../../shared/errors';
import { enqueueRun } from '../../queues/runs/flows';
import { readConfigFile } from '../../queues/runs/run-config';
import { watchRun } from '../../queues/runs/run-control';
import { planCheckedRun } from '../../queues/runs/run-preflight';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import { registerCatalogStages } from '../../workers/stage-catalog';
import type { CliContext } from '../cli-context';
import { configWarnings, withQueues } from '../command-support';
import { describeRunOutcome, unfinishedRunError, waitForRunWithProgress, writtenRunOutputs } from '../run-progress';
import { startTrainerSession } from '../trainer-session';
import type { RegisterCommand } from './index';

interface RunOptions {
  wait?: boolean;
  json?: boolean;
  artifacts?: string;
  runId?: string;
  skipEndpointChecks?: boolean;
}

/**
 * `hat run <config.yaml> [--wait] [--json] [--skip-endpoint-checks]`: validate the whole run
 * (stage configs, references, `latest` inputs resolved now, inputs that must exist, model
 * servers that must answer, tokenizer agreement), every problem in one pass (exit 2), then
 * enqueue it and optionally watch it.
 */
export const registerRunCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('run')
    .description('validate a run config and enqueue the run; --wait shows live per-stage progress')
    .argument('<config>', 'run config (YAML)')
    .option('--wait', 'wait for the run to finish, showing progress on stderr; exit 1 if it fails')
    .option('--json', 'print the result as JSON on stdout')
    .option('--artifacts <uri>', 'artifact root (beats the config and HAT_ARTIFACTS)')
    .option('--run-id <id>', 'run id (beats the config)')
    .option(
      '--skip-endpoint-checks',
      'do not ask model servers for their models (planning offline); inputs are still checked',
    )
    .action(async (file: string, options: RunOptions) => {
      registerCatalogStages();
      const source = await readConfigFile(file);
      const stores = createStoreCache(context.env);
      let checked: Awaited<ReturnType<typeof planCheckedRun>>;
      try {
        checked = await planCheckedRun(source, {
          env: context.env,
          now: new Date(),
          artifacts: options.artifacts,
          runId: options.runId,
          openObject: stores.openObject,
          environment: context.environment,
          checkEndpoints: !options.skipEndpointChecks,
          onDeprecatedSpelling: configWarnings(context),
        });
      } finally {
        await stores.close();
      }
      const { plan, notes } = checked;
      for (const note of notes) context.stderr.write(`note: ${formatProblem(note)}\n`);
      for (const input of plan.resolvedInputs ?? [])
        context.stderr.write(
          `latest: ${input.path} -> ${input.partition}${input.skipped ? ` (passed over incomplete ${input.skipped.join(', ')})` : ''}\n`,
        );
      await withQueues(
        context,
        async (queues) => {
          const result = await enqueueRun(queues, plan);
          const stages = plan.stages.map((stage) => stage.name);
          if (!options.wait) {
            if (options.json)
              context.printJson({
                ...result,
                stages,
                ...(plan.resolvedInputs ? { resolvedInputs: plan.resolvedInputs } : {}),
              });
            else if (result.enqueued) context.print(`enqueued run ${plan.runId} (stages: ${stages.join(', ')})`);
            else {
              const next =
                result.existingState === 'failed'
                  ? `; \`hat runs retry ${plan.runId}\` continues it (failed or cancelled), reusing finished parts`
                  : '';
              context.print(`run ${plan.runId} already exists (${result.existingState}); nothing enqueued${next}`);
            }
            return;
          }
          context.stderr.write(
            `${result.enqueued ? 'enqueued' : 'watching existing'} run ${plan.runId} (stages: ${stages.join(', ')})\n`,
          );
          // Handoffs with `trainer.executor: command` are trained from this process while it waits.
          const commandHandoffs = plan.handoffs.filter((handoff) => handoff.trainer?.executor === 'command');
          const trainer =
            commandHandoffs.length > 0
              ? startTrainerSession(queues, {
                  runId: plan.runId,
                  env: context.env,
                  environment: context.environment,
                  log: (line) => context.stderr.write(`${line}\n`),
                })
              : undefined;
          const status = await waitForRunWithProgress(
            (onStatus) =>
              watchRun(queues, plan.runId, {
                onStatus,
                redisUnavailableMs: context.env.HAT_WATCH_REDIS_TIMEOUT_MS,
                onRedisUnavailable: (error) =>
                  context.stderr.write(
                    error
                      ? `\nRedis does not answer (${error.message}); still following run ${plan.runId}, for up to ${Math.round(context.env.HAT_WATCH_REDIS_TIMEOUT_MS / 1000)} s\n`
                      : `Redis answers again; following run ${plan.runId}\n`,
                  ),
              }),
            context.stderr,
          ).finally(() => trainer?.stop());
          const outputs = createStoreCache(context.env);
          const written = await writtenRunOutputs(status, outputs.openObject).finally(() => outputs.close());
          for (const line of describeRunOutcome(status, written)) context.stderr.write(`${line}\n`);
          if (options.json) context.printJson({ ...status, written });
          else if (written.report) context.print(status.reportHtmlUri);
          if (status.state !== 'completed') throw unfinishedRunError(status, written);
        },
        options.wait ? { role: 'watcher' } : {},
      );
    });
};
