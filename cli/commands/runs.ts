import type { Command } from 'commander';
import {
  cancelRun,
  getRunStatus,
  listRuns,
  retryRun,
  type HandoffStatus,
  type RunStatus,
} from '../../queues/runs/run-control';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import { figureLines } from '../../queues/stage-kit/stage-summary';
import { redactUrlCredentialsIn } from '../../shared/config/url-credentials';
import type { CliContext } from '../cli-context';
import { positiveInteger, withQueues } from '../command-support';
import { describeStalled, runOutputLines, writtenRunOutputs, type WrittenRunOutputs } from '../run-progress';
import type { RegisterCommand } from './index';

/** A checkpoint as one line: where it is served or stored, its policy version, whether it is simulated. */
export function describeCheckpoint(checkpoint: NonNullable<HandoffStatus['checkpoint']>): string {
  const where = checkpoint.endpoint
    ? `${checkpoint.model ?? '?'} at ${checkpoint.endpoint}`
    : `model dir ${checkpoint.modelDir ?? '?'}`;
  return `${where}${checkpoint.policyVersion !== undefined ? `, policy v${checkpoint.policyVersion}` : ''}${checkpoint.simulated ? ' (SIMULATED TRAINING: a re-seeded dummy model)' : ''}`;
}

/** A handoff's lines of `hat runs show`: what it waits for and what to do. */
function describeHandoff(handoff: HandoffStatus): string {
  const version = handoff.policyVersion !== undefined ? `, policy v${handoff.policyVersion}` : '';
  const lines = [
    `  ${handoff.name} (handoff after ${handoff.after.join(', ')}, before ${handoff.before.join(', ')}${version}): ${handoff.state}`,
  ];
  if (handoff.state === 'waiting-for-checkpoint') {
    lines.push(`    waiting for a checkpoint since ${handoff.requestedAt ?? '?'}, deadline ${handoff.deadline ?? '?'}`);
    lines.push(`    training request: ${handoff.requestUri}`);
    lines.push(`    register with:    ${handoff.registerCommand}`);
  }
  if (handoff.checkpoint) lines.push(`    checkpoint: ${describeCheckpoint(handoff.checkpoint)}`);
  if (handoff.error) lines.push(`    ${handoff.error}`);
  return lines.join('\n');
}

function printStatus(context: CliContext, status: RunStatus, written: WrittenRunOutputs): void {
  context.print(
    `run ${status.runId}: ${status.state} (source ${status.source}, created ${status.createdAt}${status.finishedAt ? `, finished ${status.finishedAt}` : ''})`,
  );
  if (status.error) context.print(`  error: ${status.error}`);
  for (const stage of status.stages) {
    const parts =
      stage.partsTotal > 0
        ? `${stage.partsDone}/${stage.partsTotal} parts${stage.partsFailed ? `, ${stage.partsFailed} failed` : ''}`
        : 'single job';
    const stalled = stage.stalled ? `, ${describeStalled(stage.stalled, stage.kind ?? stage.name)}` : '';
    const label = `${stage.name}${stage.kind ? ` (${stage.kind})` : ''}${stage.policyVersion !== undefined ? ` [policy v${stage.policyVersion}]` : ''}`;
    context.print(
      `  ${label}: ${stage.state}, ${parts}${stalled}${stage.manifestUri ? `, manifest ${stage.manifestUri}` : ''}${stage.note ? `\n    ${stage.note}` : ''}${stage.error ? `\n    ${stage.error}` : ''}`,
    );
    for (const line of figureLines(stage.figures ?? [])) context.print(`    ${line}`);
  }
  for (const handoff of status.handoffs ?? []) context.print(describeHandoff(handoff));
  for (const input of status.resolvedInputs ?? []) context.print(`  latest ${input.path}: ${input.partition}`);
  for (const line of runOutputLines(status, written)) context.print(line);
}

/** `hat runs list | show <id> | retry <id> | cancel <id>`. */
export const registerRunsCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const runs = program.command('runs').description('list, inspect, retry and cancel runs');
  runs
    .command('list')
    .description('runs known to Redis, newest first')
    .option('--json', 'print JSON')
    .option('--limit <n>', 'at most this many runs', positiveInteger, 50)
    .action(async (options: { json?: boolean; limit: number }) => {
      await withQueues(context, async (queues) => {
        const list = await listRuns(queues, options.limit);
        if (options.json) return context.printJson(list);
        if (list.length === 0) return context.print('no runs');
        for (const run of list)
          context.print(
            `${run.runId}  ${run.state.padEnd(9)}  ${run.createdAt}  ${run.source}  ${run.stages.join(',')}`,
          );
      });
    });
  runs
    .command('show')
    .description('one run: state, per-stage progress, errors, report location')
    .argument('<id>', 'run id')
    .option('--json', 'print JSON')
    .action(async (runId: string, options: { json?: boolean }) => {
      await withQueues(context, async (queues) => {
        // A run recorded before URIs with credentials were refused may still hold them.
        const status = redactUrlCredentialsIn(await getRunStatus(queues, runId));
        const stores = createStoreCache(context.env);
        const written = await writtenRunOutputs(status, stores.openObject).finally(() => stores.close());
        if (options.json) context.printJson({ ...status, written });
        else printStatus(context, status, written);
      });
    });
  runs
    .command('retry')
    .description('re-run only what failed: failed parts, their stages, then the run job')
    .argument('<id>', 'run id')
    .action(async (runId: string) => {
      await withQueues(context, async (queues) => {
        const result = await retryRun(queues, runId);
        if (result.resumed)
          context.print(
            `resuming cancelled run ${runId}: stages ${result.retriedStages.join(', ')} enqueued again; finished parts are reused`,
          );
        else
          context.print(
            `retrying run ${runId}: ${result.retriedParts} failed part(s), stage(s) ${result.retriedStages.join(', ') || '(none)'}`,
          );
      });
    });
  runs
    .command('cancel')
    .description('cancel a run: remove its waiting jobs and mark it cancelled (running jobs finish)')
    .argument('<id>', 'run id')
    .action(async (runId: string) => {
      await withQueues(context, async (queues) => {
        const result = await cancelRun(queues, runId, Date.now());
        context.print(
          `cancelled run ${runId}: removed its ${result.pendingBefore} pending stage job(s) and their waiting parts; running jobs finish, then the run records "cancelled"`,
        );
      });
    });
};
