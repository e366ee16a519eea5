import type { Command } from 'commander';
import { HatError } from '../../shared/errors';
import { enqueueRun } from '../../queues/flows';
import { planRun, readConfigFile } from '../../queues/run-config';
import { watchRun } from '../../queues/run-control';
import { registerCatalogStages } from '../../workers/stage-catalog';
import type { CliContext } from '../cli-context';
import { withQueues } from '../command-support';
import { describeRunOutcome, waitForRunWithProgress } from '../run-progress';
import type { RegisterCommand } from './index';

interface RunOptions {
  wait?: boolean;
  json?: boolean;
  artifacts?: string;
  runId?: string;
}

/** `hat run <config.yaml> [--wait] [--json]`: validate the whole run, enqueue it, optionally watch it. */
export const registerRunCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('run')
    .description('validate a run config and enqueue the run; --wait shows live per-stage progress')
    .argument('<config>', 'run config (YAML)')
    .option('--wait', 'wait for the run to finish, showing progress on stderr; exit 1 if it fails')
    .option('--json', 'print the result as JSON on stdout')
    .option('--artifacts <uri>', 'artifact root (beats the config and HAT_ARTIFACTS)')
    .option('--run-id <id>', 'run id (beats the config)')
    .action(async (file: string, options: RunOptions) => {
      registerCatalogStages();
      const source = await readConfigFile(file);
      const plan = planRun(source.value, { env: context.env, now: new Date(), file, locator: source.locator, artifacts: options.artifacts, runId: options.runId });
      await withQueues(context, async (queues) => {
        const result = await enqueueRun(queues, plan);
        const stages = plan.stages.map((stage) => stage.name);
        if (!options.wait) {
          if (options.json) context.printJson({ ...result, stages });
          else context.print(result.enqueued ? `enqueued run ${plan.runId} (stages: ${stages.join(', ')})` : `run ${plan.runId} already exists (${result.existingState}); nothing enqueued`);
          return;
        }
        context.stderr.write(`${result.enqueued ? 'enqueued' : 'watching existing'} run ${plan.runId} (stages: ${stages.join(', ')})\n`);
        const status = await waitForRunWithProgress((onStatus) => watchRun(queues, plan.runId, { onStatus }), context.stderr);
        for (const line of describeRunOutcome(status)) context.stderr.write(`${line}\n`);
        if (options.json) context.printJson(status);
        else context.print(status.reportHtmlUri);
        if (status.state !== 'completed') throw new HatError(status.state === 'cancelled' ? 'RUN_CANCELLED' : 'RUN_FAILED', `run ${plan.runId} ${status.state}; see ${status.runManifestUri}`);
      });
    });
};
