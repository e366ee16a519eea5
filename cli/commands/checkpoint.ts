import type { Command } from 'commander';
import { registerCheckpoint } from '../../queues/register-checkpoint';
import { getRunStatus } from '../../queues/run-control';
import { createStoreCache } from '../../queues/stage-runtime';
import type { CliContext } from '../cli-context';
import { withQueues } from '../command-support';
import { registerPromotionCommands } from './checkpoint-promotion';
import type { RegisterCommand } from './index';

interface RegisterOptions {
  endpoint: string;
  model: string;
  tokenizerFingerprint?: string;
  checkpointUri?: string;
  apiKeyEnv?: string;
  skipEndpointCheck?: boolean;
  json?: boolean;
}

/**
 * `hat checkpoint register <runId> --endpoint <url> --model <name>`: hands the checkpoint a
 * trainer produced back to a run waiting at its trainer handoff. `hat checkpoint show <runId>`:
 * where the handoff is and what the trainer was asked for.
 */
export const registerCheckpointCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const checkpoint = program.command('checkpoint').description('hand trained checkpoints back to runs waiting at a trainer handoff');
  checkpoint
    .command('register')
    .description('register the checkpoint of a run: writes runs/<runId>/train/checkpoint.json and wakes the run')
    .argument('<runId>', 'run id')
    .requiredOption('--endpoint <url>', 'OpenAI-compatible base URL serving the checkpoint, e.g. http://serve:8000/v1')
    .requiredOption('--model <name>', 'model id the endpoint serves it under (as GET /v1/models lists it)')
    .option('--tokenizer-fingerprint <sha256>', "the checkpoint's tokenizer fingerprint; refused unless it matches the training data's")
    .option('--checkpoint-uri <uri>', 'where the weights are (recorded for lineage)')
    .option('--api-key-env <name>', 'environment variable with the API key the endpoint wants (for the check only)')
    .option('--skip-endpoint-check', 'register without asking the endpoint for its models')
    .option('--json', 'print JSON')
    .action(async (runId: string, options: RegisterOptions) => {
      const stores = createStoreCache(context.env);
      try {
        await withQueues(context, async (queues) => {
          const result = await registerCheckpoint(queues, {
            runId,
            endpoint: options.endpoint,
            model: options.model,
            tokenizerFingerprint: options.tokenizerFingerprint,
            checkpointUri: options.checkpointUri,
            apiKeyEnv: options.apiKeyEnv,
            checkEndpoint: !options.skipEndpointCheck,
            environment: context.environment,
            storeFor: stores.storeFor,
            now: new Date(),
          });
          if (options.json) return context.printJson(result);
          context.print(`registered checkpoint ${options.model} at ${options.endpoint} for run ${runId}${result.unchanged ? ' (unchanged)' : ''}: ${result.markerUri}`);
          if (result.handoffState === 'waiting-for-checkpoint') context.print(result.woken ? '  the run continues now' : '  the run picks it up at its next check');
          else if (result.handoffState === 'waiting-for-stages') context.print('  the run uses it once the stages before the handoff complete');
          else context.print(`  the handoff had failed; continue the run with \`hat runs retry ${runId}\``);
        });
      } finally {
        await stores.close();
      }
    });
  checkpoint
    .command('show')
    .description("a run's trainer handoff: state, training request, deadline, registered checkpoint")
    .argument('<runId>', 'run id')
    .option('--json', 'print JSON')
    .action(async (runId: string, options: { json?: boolean }) => {
      await withQueues(context, async (queues) => {
        const { handoff } = await getRunStatus(queues, runId);
        if (options.json) return context.printJson(handoff ?? null);
        if (!handoff) return context.print(`run ${runId} has no trainer handoff`);
        context.print(`run ${runId} handoff: ${handoff.state} (after ${handoff.after.join(', ')}; before ${handoff.before.join(', ')})`);
        context.print(`  training request: ${handoff.requestUri}${handoff.requestedAt ? ` (written ${handoff.requestedAt})` : ' (not yet written)'}`);
        context.print(`  checkpoint marker: ${handoff.checkpointUri}`);
        if (handoff.deadline) context.print(`  deadline: ${handoff.deadline}`);
        if (handoff.checkpoint) context.print(`  checkpoint: ${handoff.checkpoint.model} at ${handoff.checkpoint.endpoint}`);
        if (handoff.state === 'waiting-for-checkpoint') context.print(`  register with: ${handoff.registerCommand}`);
        if (handoff.error) context.print(`  ${handoff.error}`);
      });
    });
  registerPromotionCommands(checkpoint, context);
};
