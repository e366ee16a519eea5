import type { Command } from 'commander';
import { collectDeprecatedSpellings } from '../../shared/config/deprecated-spellings';
import { findUrlCredentials } from '../../shared/config/url-credentials';
import { ProblemCollector } from '../../shared/errors';
import { createArtifactStore } from '../../shared/artifacts/create-artifact-store';
import { plainLocator, readConfigFile } from '../../queues/runs/run-config';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { getStage } from '../../queues/stage-kit/stage-registry';
import { createStoreCache } from '../../queues/bullmq/stage-runtime';
import { figureLines, summarizeStageOutput } from '../../queues/stage-kit/stage-summary';
import { registerCatalogStages } from '../../workers/stage-catalog';
import type { CliContext } from '../cli-context';
import { configWarnings, positiveInteger } from '../command-support';
import { createProgressView } from '../run-progress';
import type { RegisterCommand } from './index';

interface StageOptions {
  config?: string;
  in?: string[];
  out: string;
  runId: string;
  seed: string;
  concurrency?: number;
  json?: boolean;
}

const localStates = { plan: 'planning', parts: 'running', finish: 'finishing', done: 'completed' } as const;

/**
 * `hat stage <name> --config <file> [--in <uri>...] --out <uri>`: one stage in this process with
 * no Redis: the same processor, plan, parts and finish as a worker runs. `--in` URIs become the
 * config's `inputs`. Output objects and the manifest go under `--out`; the stage result is
 * printed on stdout, progress on stderr.
 */
export const registerStageCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('stage')
    .description('run one stage in-process (no Redis): plan, parts and finish locally')
    .argument('<name>', 'registered stage name')
    .option('--config <file>', 'stage config (YAML); default {}')
    .option('--in <uri...>', "input URIs (set as the config's inputs)")
    .requiredOption('--out <uri>', 'where the output goes: s3://bucket/prefix or file:///dir')
    .option('--run-id <id>', 'run id recorded in manifests', 'local')
    .option('--seed <seed>', 'seed of the random choices', '0')
    .option('--concurrency <n>', 'parts at once', positiveInteger)
    .option('--json', 'print the stage result as JSON (default: a summary line)')
    .action(async (name: string, options: StageOptions) => {
      registerCatalogStages();
      const stage = getStage(name);
      const source = options.config
        ? await readConfigFile(options.config, 'stage config')
        : { value: {}, locator: plainLocator() };
      const value = source.value ?? {};
      const config = options.in && options.in.length > 0 ? { ...value, inputs: options.in } : value;
      const { result: checked, spellings } = collectDeprecatedSpellings(config, () => stage.input.safeParse(config));
      const warn = configWarnings(context);
      for (const spelling of spellings) warn(source.locator.problem(spelling.path, spelling.message));
      const problems = new ProblemCollector();
      for (const found of findUrlCredentials(config)) problems.add(source.locator.problem(found.path, found.message));
      if (!checked.success) problems.addAll(source.locator.zodProblems(checked.error));
      if (!problems.ok) {
        problems.throwIfAny(
          'STAGE_INPUT_INVALID',
          `the config of stage "${name}" is invalid; fix the fields named below`,
        );
      }
      const stores = createStoreCache(
        context.env,
        (rootUri) => createArtifactStore(rootUri, context.env),
        context.logger,
      );
      const store = stores.storeFor(options.out);
      const view = createProgressView(context.stderr);
      try {
        const result = await runStageLocally(stage, config, {
          store,
          openObject: stores.openObject,
          runId: options.runId,
          seed: options.seed,
          logger: context.logger,
          concurrency: options.concurrency,
          storageRetryMs: context.env.HAT_STORAGE_RETRY_MS,
          onProgress: (progress) =>
            view.update([
              {
                name: progress.stage,
                state: localStates[progress.phase],
                partsDone: progress.partsDone,
                partsTotal: progress.partsTotal,
              },
            ]),
        });
        view.stop();
        if (options.json) context.printJson(result.output);
        else {
          const manifestUri = (result.output as { manifestUri?: unknown }).manifestUri;
          context.print(
            `stage ${name}: done${result.parts > 0 ? `, ${result.parts} parts` : ''}${typeof manifestUri === 'string' ? `; manifest ${manifestUri}` : ''}`,
          );
        }
        // Figures the run report shows amber or red are printed too (on stderr, so --json stays parseable).
        const flagged = (summarizeStageOutput(name, result.output)?.figures ?? []).filter(
          (figure) => figure.tone === 'warn' || figure.tone === 'fail',
        );
        for (const line of figureLines(flagged))
          context.stderr.write(`warning: stage ${name}: ${line.replace(/^! /, '')}\n`);
      } finally {
        view.stop();
        await stores.close();
      }
    });
};
