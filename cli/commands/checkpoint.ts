import type { Command } from 'commander';
import { registerCheckpoint } from '../../queues/runs/register-checkpoint';
import { getRunStatus } from '../../queues/runs/run-control';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import type { CliContext } from '../cli-context';
import { positiveInteger, withQueues } from '../command-support';
import { describeCheckpoint } from './runs';
import { registerPromotionCommands } from './checkpoint-promotion';
import type { RegisterCommand } from './index';

interface RegisterOptions {
  handoff?: string;
  endpoint?: string;
  model?: string;
  modelDir?: string;
  request?: string;
  policyVersion?: number;
  tokenizerFingerprint?: string;
  checkpointUri?: string;
  apiKeyEnv?: string;
  skipEndpointCheck?: boolean;
  json?: boolean;
}

/**
 * `hat checkpoint register <runId> [--handoff <name>] --endpoint <url> --model <name> | --model-dir <dir>`:
 * hands the checkpoint a trainer produced back to a run waiting at one of its trainer handoffs.
 * `hat checkpoint show <runId>`: where each handoff is and what the trainer was asked for.
 */
export const registerCheckpointCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const checkpoint = program
    .command('checkpoint')
    .description('hand trained checkpoints back to runs waiting at a trainer handoff');
  checkpoint
    .command('register')
    .description('register the checkpoint of a run: writes runs/<runId>/<handoff>/checkpoint.json and wakes the run')
    .argument('<runId>', 'run id')
    .option('--handoff <name>', 'the handoff this checkpoint answers (required when the run has several)')
    .option('--endpoint <url>', 'OpenAI-compatible base URL serving the checkpoint, e.g. http://serve:8000/v1')
    .option('--model <name>', 'model id the endpoint serves it under (as GET /v1/models lists it)')
    .option(
      '--model-dir <dir>',
      'a model directory (ONNX export) the workers read, for ${checkpoints.<handoff>.modelDir}',
    )
    .option('--request <uri>', "the training request it was trained on; refused unless it is this run's and handoff's")
    .option(
      '--policy-version <n>',
      'the policy version it is; refused unless the handoff asks for that one',
      positiveInteger,
    )
    .option(
      '--tokenizer-fingerprint <sha256>',
      "the checkpoint's tokenizer fingerprint; refused unless it matches the training data's",
    )
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
            handoff: options.handoff,
            endpoint: options.endpoint,
            model: options.model,
            modelDir: options.modelDir,
            requestUri: options.request,
            policyVersion: options.policyVersion,
            tokenizerFingerprint: options.tokenizerFingerprint,
            checkpointUri: options.checkpointUri,
            apiKeyEnv: options.apiKeyEnv,
            checkEndpoint: !options.skipEndpointCheck,
            environment: context.environment,
            storeFor: stores.storeFor,
            now: new Date(),
          });
          if (options.json) return context.printJson(result);
          const what = options.endpoint ? `${options.model} at ${options.endpoint}` : `model dir ${options.modelDir}`;
          context.print(
            `registered checkpoint ${what} for handoff ${result.handoff} of run ${runId}${result.unchanged ? ' (unchanged)' : ''}: ${result.markerUri}`,
          );
          if (result.handoffState === 'waiting-for-checkpoint')
            context.print(result.woken ? '  the run continues now' : '  the run picks it up at its next check');
          else if (result.handoffState === 'waiting-for-stages')
            context.print('  the run uses it once the stages before the handoff complete');
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
        const { handoffs } = await getRunStatus(queues, runId);
        if (options.json) return context.printJson(handoffs ?? []);
        if (!handoffs || handoffs.length === 0) return context.print(`run ${runId} has no trainer handoff`);
        for (const handoff of handoffs) {
          const version = handoff.policyVersion !== undefined ? `; policy v${handoff.policyVersion}` : '';
          context.print(
            `run ${runId} handoff ${handoff.name}: ${handoff.state} (after ${handoff.after.join(', ')}; before ${handoff.before.join(', ')}${version})`,
          );
          context.print(
            `  training request: ${handoff.requestUri}${handoff.requestedAt ? ` (written ${handoff.requestedAt})` : ' (not yet written)'}`,
          );
          context.print(`  checkpoint marker: ${handoff.checkpointUri}`);
          if (handoff.deadline) context.print(`  deadline: ${handoff.deadline}`);
          if (handoff.checkpoint) context.print(`  checkpoint: ${describeCheckpoint(handoff.checkpoint)}`);
          if (handoff.state === 'waiting-for-checkpoint') context.print(`  register with: ${handoff.registerCommand}`);
          if (handoff.error) context.print(`  ${handoff.error}`);
        }
      });
    });
  registerPromotionCommands(checkpoint, context);
};
