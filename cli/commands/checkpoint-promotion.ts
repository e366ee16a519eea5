import type { Command } from 'commander';
import {
  listPromotions,
  pointerLocationOf,
  readPromotedCheckpoint,
  writePromotion,
  type PromotedCheckpoint,
} from '../../queues/runs/promoted-checkpoint';
import { gateDecisionObject, gateStageName, type GateDecisionRecord } from '../../queues/runs/run-gate';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import { stagePrefix } from '../../shared/artifacts/artifact-layout';
import { BadInputError } from '../../shared/errors';
import type { CliContext } from '../cli-context';

interface PromoteOptions {
  endpoint?: string;
  model?: string;
  run?: string;
  artifacts?: string;
  note?: string;
  json?: boolean;
}

/** The artifact root the pointer lives under: `--artifacts`, else HAT_ARTIFACTS. */
function artifactsRootOf(context: CliContext, given: string | undefined): string {
  const root = given ?? context.env.HAT_ARTIFACTS;
  if (!root)
    throw new BadInputError(
      'NO_ARTIFACTS',
      'no artifact store: pass --artifacts s3://bucket/prefix (or file:///dir), or set HAT_ARTIFACTS',
    );
  if (!/^(s3|file):\/\/.+/.test(root))
    throw new BadInputError('NO_ARTIFACTS', `"${root}" must be an s3://bucket/prefix or file:///absolute/dir URI`);
  return root;
}

function describe(record: PromotedCheckpoint): string {
  return `${record.model} at ${record.endpoint} (promoted ${record.promotedAt} by ${record.promotedBy}${record.runId ? `, run ${record.runId}` : ''})`;
}

/**
 * `hat checkpoint promote` and `hat checkpoint list`: the promoted-checkpoint pointer
 * (queues/runs/promoted-checkpoint.ts), what `latestCheckpoint` inputs resolve to for the next run.
 */
export function registerPromotionCommands(checkpoint: Command, context: CliContext): void {
  checkpoint
    .command('promote')
    .description(
      'make a checkpoint the promoted one (what latestCheckpoint resolves to for the next run), overriding the gate',
    )
    .option('--endpoint <url>', 'OpenAI-compatible base URL serving it')
    .option('--model <name>', 'model id it is served under')
    .option('--run <runId>', "promote the candidate a run's gate decided about (held or not)")
    .option('--artifacts <uri>', 'artifact root holding checkpoints/ (default HAT_ARTIFACTS)')
    .option('--note <text>', 'why (kept in the promotion history)')
    .option('--json', 'print JSON')
    .action(async (options: PromoteOptions) => {
      const root = artifactsRootOf(context, options.artifacts);
      const stores = createStoreCache(context.env);
      try {
        const location = pointerLocationOf(root, stores.openObject);
        let checkpointFields: { endpoint: string; model: string; label?: string; scoresUri?: string };
        if (options.run) {
          if (options.endpoint || options.model)
            throw new BadInputError('BAD_USAGE', 'give --run, or --endpoint with --model, not both');
          const key = `${location.prefix}${stagePrefix(options.run, gateStageName)}${gateDecisionObject}`;
          if (!(await location.store.head(key)))
            throw new BadInputError(
              'NO_GATE_DECISION',
              `run ${options.run} has no gate decision at ${location.store.uriOf(key)}; check the run id and --artifacts`,
            );
          const decision = JSON.parse((await location.store.getBuffer(key)).toString('utf8')) as GateDecisionRecord;
          checkpointFields = { ...decision.checkpoint, label: decision.candidate, scoresUri: decision.scoresUri };
        } else {
          if (!options.endpoint || !options.model)
            throw new BadInputError('BAD_USAGE', 'give --endpoint <url> and --model <name> (or --run <runId>)');
          checkpointFields = { endpoint: options.endpoint, model: options.model };
        }
        const record: PromotedCheckpoint = {
          schemaVersion: 1,
          ...checkpointFields,
          promotedBy: 'cli',
          promotedAt: new Date().toISOString(),
          reasons: [options.note ?? (options.run ? `promoted by hand from run ${options.run}` : 'promoted by hand')],
        };
        const previous = await readPromotedCheckpoint(location);
        const written = await writePromotion(location, record);
        if (options.json) return context.printJson({ promoted: record, previous: previous ?? null, ...written });
        context.print(`promoted ${describe(record)}: ${written.pointerUri}`);
        if (previous) context.print(`  before: ${describe(previous)}`);
      } finally {
        await stores.close();
      }
    });
  checkpoint
    .command('list')
    .description('the promoted checkpoint and every promotion before it')
    .option('--artifacts <uri>', 'artifact root holding checkpoints/ (default HAT_ARTIFACTS)')
    .option('--json', 'print JSON')
    .action(async (options: { artifacts?: string; json?: boolean }) => {
      const root = artifactsRootOf(context, options.artifacts);
      const stores = createStoreCache(context.env);
      try {
        const location = pointerLocationOf(root, stores.openObject);
        const current = await readPromotedCheckpoint(location);
        const history = await listPromotions(location);
        if (options.json) return context.printJson({ promoted: current ?? null, history });
        if (!current) context.print(`no promoted checkpoint under ${root}`);
        else context.print(`promoted: ${describe(current)}`);
        for (const record of [...history].reverse())
          context.print(
            `  ${record.promotedAt}  ${record.model} at ${record.endpoint}  ${record.promotedBy}${record.runId ? ` ${record.runId}` : ''}  ${record.reasons.join('; ')}`,
          );
      } finally {
        await stores.close();
      }
    });
}
