import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { createArtifactStore } from '../../shared/artifacts/create-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../../shared/artifacts/local-s3-server';
import type { HatEnv } from '../../shared/config/env';
import type { QueueContext } from '../../queues/bullmq/queue-context';
import { HatError } from '../../shared/errors';
import { createLogger } from '../../shared/log/logger';
import { startServeServer, type ServeServer } from '../../serve/serve-server';
import { enqueueRun } from '../../queues/runs/flows';
import { planRun, readConfigFile } from '../../queues/runs/run-config';
import { watchRun } from '../../queues/runs/run-control';
import { runManifestKey, runReportKeys } from '../../queues/runs/run-layout';
import { runsQueueName } from '../../queues/stage-kit/stage-names';
import { relativeToRun } from '../../workers/run/run-report';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { startWorkerPool } from '../../workers/worker-pool';
import type { CliContext } from '../cli-context';
import {
  describeRunOutcome,
  unfinishedRunError,
  waitForRunWithProgress,
  writtenRunOutputs,
  type WrittenRunOutputs,
} from '../run-progress';
import { startSimulatedTrainer } from '../simulated-trainer';
import { projectRoot } from '../project-root';
import { startTrainerSession } from '../trainer-session';
import type { RegisterCommand } from './index';

/** The demo's run config: every stage `hat demo` runs is named in this one file. */
export function demoRunConfigFile(): string {
  return join(projectRoot(), 'examples', 'demo-run.yaml');
}

/** A model endpoint the demo serves itself: `baseUrl: hat-serve:<model spec>` (a model directory or a `dummy:` spec). */
const servedPrefix = 'hat-serve:';

/**
 * Starts `hat serve` in this process for every model config of the run config whose `baseUrl`
 * reads `hat-serve:<model spec>` (one server per spec and model name), and points the config at
 * it: so the demo's distill student and rl policy are sampled over the same HTTP path (token-id
 * prompts, sampled ids with logprobs) as a vLLM server in production. `dummyWeights` is set from
 * the server, so random-weight models are labelled in every record and report.
 */
export async function startDemoModelServers(config: unknown, log: (line: string) => void): Promise<ServeServer[]> {
  const servers = new Map<string, ServeServer>();
  const visit = async (value: unknown): Promise<void> => {
    if (Array.isArray(value)) {
      for (const item of value) await visit(item);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const record = value as Record<string, unknown>;
    if (typeof record.baseUrl === 'string' && record.baseUrl.startsWith(servedPrefix)) {
      const spec = record.baseUrl.slice(servedPrefix.length);
      const modelName = typeof record.model === 'string' ? record.model : 'demo-model';
      const logprobsMode = record.logprobsMode === 'processed_logprobs' ? 'processed_logprobs' : 'raw_logprobs';
      const key = JSON.stringify([spec, modelName, logprobsMode]);
      let server = servers.get(key);
      if (!server) {
        server = await startServeServer({ model: spec, servedModelName: modelName, logprobsMode });
        servers.set(key, server);
        log(
          `started hat serve for ${modelName} (${spec}${server.dummyWeights ? ', dummy weights' : ''}) at ${server.baseUrl}`,
        );
      }
      record.baseUrl = server.baseUrl;
      record.dummyWeights = server.dummyWeights;
      return;
    }
    for (const item of Object.values(record)) await visit(item);
  };
  try {
    await visit(config);
  } catch (error) {
    await Promise.allSettled([...servers.values()].map((server) => server.close()));
    throw error;
  }
  return [...servers.values()];
}

interface DemoOptions {
  out?: string;
  config?: string;
  json?: boolean;
  trainer: 'command' | 'simulated';
}

/**
 * `hat demo [--out <uri>]`: the pipeline on embedded defaults. Starts a local S3-compatible
 * server unless an artifact root is given (`--out`, else HAT_ARTIFACTS), runs the demo run config
 * through real queues with workers in this process, shows progress and prints where the
 * artifacts and the run report are. Redis is the one prerequisite (REDIS_URL).
 */
export const registerDemoCommand: RegisterCommand = (program: Command, context: CliContext) => {
  program
    .command('demo')
    .description('run the demo pipeline through real queues with in-process workers; prints where the report is')
    .option('--out <uri>', 'artifact root (s3://bucket/prefix or file:///dir); default: a local S3-compatible server')
    .option('--config <file>', 'run config to use instead of examples/demo-run.yaml')
    .option('--json', 'print the final run status as JSON on stdout')
    .option(
      '--trainer <kind>',
      "who answers the handoffs: command (the pipeline's trainer, trainer/, trains for real) or simulated (re-seeded dummy models, no training)",
      'command',
    )
    .action(async (options: DemoOptions) => {
      if (options.trainer !== 'command' && options.trainer !== 'simulated')
        throw new HatError('BAD_USAGE', `--trainer ${String(options.trainer)}: use command or simulated`, {
          exitCode: 2,
        });
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
      const modelServers = await startDemoModelServers(source.value, (line) => context.stderr.write(`${line}\n`));
      const stopModelServers = () => Promise.allSettled(modelServers.map((modelServer) => modelServer.close()));
      let plan: ReturnType<typeof planRun>;
      let pool: Awaited<ReturnType<typeof startWorkerPool>>;
      try {
        plan = planRun(source.value, {
          env,
          now: new Date(),
          file: configFile,
          locator: source.locator,
          artifacts: artifactsRoot,
          source: 'demo',
        });
        const logger = createLogger({ level: process.env.HAT_LOG_LEVEL ?? 'warn' });
        pool = await startWorkerPool({
          env,
          queues: [...new Set(plan.stages.map((stage) => stage.kind)), runsQueueName],
          logger,
        });
      } catch (error) {
        await stopModelServers();
        await server?.stop();
        throw error;
      }
      const checkpointServers: ServeServer[] = [];
      let trainer: { stop(): Promise<void> } | undefined;
      try {
        await pool.waitUntilReady();
        await enqueueRun(pool.context, plan);
        context.stderr.write(
          `run ${plan.runId}: stages ${plan.stages.map((stage) => stage.name).join(', ')}; artifacts under ${plan.artifactsRoot}/runs/${plan.runId}/\n`,
        );
        if (plan.handoffs.length > 0) {
          const chain = plan.handoffs.map((handoff) => handoff.name).join(' -> ');
          context.stderr.write(
            options.trainer === 'simulated'
              ? `trainer handoffs ${chain}: answered by the SIMULATED TRAINER (no training happens; each checkpoint is a re-seeded dummy model)\n`
              : `trainer handoffs ${chain}: answered by the pipeline's trainer (trainer/, PyTorch on this machine's CPU; log and result beside each request)\n`,
          );
          const log = (line: string) => context.stderr.write(`${line}\n`);
          trainer =
            options.trainer === 'simulated'
              ? startDemoTrainer(plan.runId, pool.context, env, checkpointServers, log)
              : startTrainerSession(pool.context, {
                  runId: plan.runId,
                  env,
                  // The trainer process reads the data from the demo's S3 server.
                  environment: { ...process.env, ...server?.env, ...(server ? { S3_FORCE_PATH_STYLE: 'true' } : {}) },
                  executors: 'all',
                  log,
                });
        }
        const status = await waitForRunWithProgress(
          (onStatus) => watchRun(pool.context, plan.runId, { onStatus, intervalMs: 250 }),
          context.stderr,
        );
        const store = createArtifactStore(plan.artifactsRoot, env);
        let written: WrittenRunOutputs;
        try {
          // Only what the run job wrote is named or copied (a store fault can leave the report unwritten).
          written = await writtenRunOutputs(status, (uri) => ({ store, key: store.keyOf(uri) }));
          for (const line of describeRunOutcome(status, written)) context.stderr.write(`${line}\n`);
          if (server && written.report) {
            // The report as a local file a browser opens directly (the S3 server stops with the demo).
            const local = resolve('.hat', 'demo', plan.runId, 'run-report.html');
            await mkdir(dirname(local), { recursive: true });
            await writeFile(local, await store.getBuffer(runReportKeys(plan.runId).html));
            const copied = written.manifest ? await copyStageReports(store, plan.runId, dirname(local)) : 0;
            context.stderr.write(
              `  local copy:   ${local} (with ${copied} stage report${copied === 1 ? '' : 's'} beside it, linked relatively)\n`,
            );
          }
        } finally {
          await store.close();
        }
        if (options.json) context.printJson({ ...status, written });
        else if (written.report) context.print(status.reportHtmlUri);
        if (status.state !== 'completed') throw unfinishedRunError(status, written);
      } finally {
        await trainer?.stop();
        await pool.close();
        await server?.stop();
        await stopModelServers();
        await Promise.allSettled(checkpointServers.map((checkpointServer) => checkpointServer.close()));
      }
    });
};

/**
 * The demo's trainer: the simulated trainer (cli/simulated-trainer.ts) answers each handoff with a
 * re-seeded dummy model, served by `hat serve` in this process (into `servers`, closed by the
 * caller) and registered with its endpoint, model id and directory, labelled simulated training.
 */
function startDemoTrainer(
  runId: string,
  queues: QueueContext,
  env: HatEnv,
  servers: ServeServer[],
  log: (line: string) => void,
): { stop(): Promise<void> } {
  const stores = new Map<string, ArtifactStore>();
  const storeFor = (rootUri: string): ArtifactStore => {
    let store = stores.get(rootUri);
    if (!store) {
      store = createArtifactStore(rootUri, env);
      stores.set(rootUri, store);
    }
    return store;
  };
  const trainer = startSimulatedTrainer(queues, {
    runId,
    modelCacheDir: resolve('.hat', 'models'),
    storeFor,
    async serve(modelDir, modelName) {
      const served = await startServeServer({ model: modelDir, servedModelName: modelName });
      servers.push(served);
      return served.baseUrl;
    },
    onRegistered: (event) =>
      log(
        `SIMULATED TRAINING (no training happened): handoff ${event.handoff} -> checkpoint ${event.model} (re-seeded dummy model${event.policyVersion !== undefined ? `, policy v${event.policyVersion}` : ''}) served at ${event.endpoint}`,
      ),
    onError: (error) => log(`simulated trainer: ${error.message} (trying again)`),
  });
  return {
    async stop() {
      await trainer.stop();
      await Promise.allSettled([...stores.values()].map((store) => store.close()));
    },
  };
}

/**
 * Copies every stage report the run report links (objects under the run's folder) beside the
 * local copy of the run report, at the same relative paths, so its links open in a browser after
 * the demo's S3 server has stopped. Returns how many were copied.
 */
async function copyStageReports(store: ArtifactStore, runId: string, directory: string): Promise<number> {
  const manifest = JSON.parse((await store.getBuffer(runManifestKey(runId))).toString('utf8')) as {
    stages: Array<{ links?: Array<{ uri: string }> }>;
  };
  const runRoot = `${store.rootUri}/runs/${runId}`;
  let copied = 0;
  for (const link of manifest.stages.flatMap((stage) => stage.links ?? [])) {
    const relative = relativeToRun(link.uri, runRoot);
    if (!relative || /^https?:/.test(relative)) continue;
    const target = join(directory, ...relative.split('/').map(decodeURIComponent));
    if (!target.startsWith(`${directory}/`)) continue;
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, await store.getBuffer(store.keyOf(link.uri)));
    copied += 1;
  }
  return copied;
}
