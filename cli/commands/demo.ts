import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { createArtifactStore } from '../../shared/artifacts/create-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../../shared/artifacts/local-s3-server';
import type { HatEnv } from '../../shared/config/env';
import { HatError } from '../../shared/errors';
import { createLogger } from '../../shared/log/logger';
import { enqueueRun } from '../../queues/flows';
import { planRun, readConfigFile } from '../../queues/run-config';
import { watchRun } from '../../queues/run-control';
import { runReportKeys } from '../../queues/run-layout';
import { runsQueueName } from '../../queues/queue-names';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { startWorkerPool } from '../../workers/worker-pool';
import type { CliContext } from '../cli-context';
import { describeRunOutcome, waitForRunWithProgress } from '../run-progress';
import { startSimulatedTrainer } from '../simulated-trainer';
import type { RegisterCommand } from './index';

/** The project root (where package.json is), from sources or from dist/. */
function projectRoot(): string {
  let directory = __dirname;
  while (!existsSync(join(directory, 'package.json')) && dirname(directory) !== directory) directory = dirname(directory);
  return directory;
}

/** The demo's run config: every stage `hat demo` runs is named in this one file. */
export function demoRunConfigFile(): string {
  return join(projectRoot(), 'examples', 'demo-run.yaml');
}

interface DemoOptions {
  out?: string;
  config?: string;
  json?: boolean;
}

/**
 * `hat demo [--out <uri>]`: the pipeline on embedded defaults. Starts a local S3-compatible
 * server unless an artifact root is given (`--out`, else HAT_ARTIFACTS), runs the demo run config
 * through real queues with workers in this process, answers its trainer handoffs with the
 * simulated trainer (cli/simulated-trainer.ts: re-seeded dummy models, labelled as simulated
 * training), shows progress and prints where the artifacts and the run report are. Redis is the
 * one prerequisite (REDIS_URL).
 */
export const registerDemoCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('demo')
    .description('run the demo pipeline through real queues with in-process workers; prints where the report is')
    .option('--out <uri>', 'artifact root (s3://bucket/prefix or file:///dir); default: a local S3-compatible server')
    .option('--config <file>', 'run config to use instead of examples/demo-run.yaml')
    .option('--json', 'print the final run status as JSON on stdout')
    .action(async (options: DemoOptions) => {
      registerCatalogStages();
      const configFile = options.config ?? demoRunConfigFile();
      const source = await readConfigFile(configFile);
      let server: LocalS3Server | undefined;
      let env: HatEnv = context.env;
      let artifactsRoot = options.out ?? context.env.HAT_ARTIFACTS;
      if (!artifactsRoot) {
        const directory = resolve('.hat', 'demo-s3');
        await mkdir(directory, { recursive: true });
        server = await startLocalS3Server({ bucket: 'hat-demo', directory, keepDirectory: true });
        env = { ...env, ...server.env, S3_FORCE_PATH_STYLE: 'true' };
        artifactsRoot = `s3://${server.bucket}/demo`;
        context.stderr.write(`started a local S3-compatible server at ${server.endpoint} (files in ${directory})\n`);
      }
      const plan = planRun(source.value, { env, now: new Date(), file: configFile, locator: source.locator, artifacts: artifactsRoot, source: 'demo' });
      const logger = createLogger({ level: process.env.HAT_LOG_LEVEL ?? 'warn' });
      const pool = await startWorkerPool({ env, queues: [...new Set(plan.stages.map((stage) => stage.kind)), runsQueueName], logger });
      const trainerStore = createArtifactStore(plan.artifactsRoot, env);
      let trainer: { stop(): Promise<void> } | undefined;
      try {
        await pool.waitUntilReady();
        await enqueueRun(pool.context, plan);
        const order = [...plan.stages.filter((stage) => !stage.segment).map((stage) => stage.name)];
        for (const handoff of plan.handoffs) order.push(`[handoff ${handoff.name}]`, ...plan.stages.filter((stage) => stage.segment === handoff.name).map((stage) => stage.name));
        context.stderr.write(`run ${plan.runId}: ${order.join(' -> ')}; artifacts under ${plan.artifactsRoot}/runs/${plan.runId}/\n`);
        if (plan.handoffs.length > 0) {
          trainer = startSimulatedTrainer(pool.context, {
            runId: plan.runId,
            modelCacheDir: resolve('.hat', 'models'),
            storeFor: () => trainerStore,
            onRegistered: (event) =>
              context.stderr.write(
                `SIMULATED TRAINING (no training happens): handoff ${event.handoff} answered with a re-seeded dummy model${event.policyVersion !== undefined ? ` as policy v${event.policyVersion}` : ''}: ${event.modelDir}\n`,
              ),
          });
        }
        const status = await waitForRunWithProgress((onStatus) => watchRun(pool.context, plan.runId, { onStatus, intervalMs: 250 }), context.stderr);
        for (const line of describeRunOutcome(status)) context.stderr.write(`${line}\n`);
        if (server) {
          // The report as a local file a browser opens directly (the S3 server stops with the demo).
          const local = resolve('.hat', 'demo', plan.runId, 'run-report.html');
          await mkdir(dirname(local), { recursive: true });
          const store = createArtifactStore(plan.artifactsRoot, env);
          try {
            await writeFile(local, await store.getBuffer(runReportKeys(plan.runId).html));
          } finally {
            await store.close();
          }
          context.stderr.write(`  local copy:   ${local}\n`);
        }
        if (options.json) context.printJson(status);
        else context.print(status.reportHtmlUri);
        if (status.state !== 'completed') throw new HatError('RUN_FAILED', `demo run ${plan.runId} ${status.state}; see ${status.runManifestUri}`);
      } finally {
        await trainer?.stop();
        await trainerStore.close();
        await pool.close();
        await server?.stop();
      }
    });
};
