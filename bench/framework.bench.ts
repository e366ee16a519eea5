/**
 * Overhead of the stage framework: N no-op jobs through a stage binding (the `noop` example
 * stage: job-data and input validation, deps, output check) versus a raw BullMQ Worker with an
 * empty processor, same Redis, same concurrency, same job options. Prints jobs/s for each and
 * their ratio (goal: framework / raw >= 0.9, issue #18). Rounds alternate so drift hits both sides.
 *
 *   node dist/bench/framework.bench.js            (BENCH_JOBS=5000 BENCH_CONCURRENCY=8 BENCH_ROUNDS=21)
 *
 * The defaults make a run of about 25 s. Shorter runs measure the same thing less precisely: a
 * round of 2,000 jobs lasts about 0.1 s here, and with 11 of them the run's median ranged over
 * 0.87-0.99 in 18 runs of the same code, against 0.91-0.96 in 15 runs with these defaults.
 *
 * BENCH_SIDE=raw or BENCH_SIDE=stage runs one side alone (no ratio): for profiling each side
 * with `node --cpu-prof`, so one profile holds one side's frames only.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker, type Processor } from 'bullmq';
import { loadEnv, type HatEnv } from '../shared/config/env';
import { silentLogger } from '../shared/log/logger';
import { stageJobOptions } from '../queues/bullmq/job-options';
import { openQueueContext, type QueueContext } from '../queues/bullmq/queue-context';
import { createRedisConnection, deleteKeysMatching } from '../queues/bullmq/redis-connection';
import { createStageJobRuntime, createStoreCache } from '../queues/bullmq/stage-runtime';
import { createStageWorker } from '../queues/bullmq/worker-factory';
import { noopStage } from '../workers/examples/noop/processor';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

const jobs = Number(process.env.BENCH_JOBS ?? 5_000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8);
const rounds = Number(process.env.BENCH_ROUNDS ?? 21);
const only = process.env.BENCH_SIDE as 'raw' | 'stage' | undefined;
if (only !== undefined && only !== 'raw' && only !== 'stage') throw new Error('BENCH_SIDE must be raw or stage');

/** Process CPU time (user + system) per side over the measured rounds, µs: steadier than wall time on a shared machine. */
const cpuMicros = { raw: 0, stage: 0 };
let measuring = false;

/** Resolves with the wall time until `total` jobs completed. */
async function drain(worker: Worker, total: number, side: keyof typeof cpuMicros): Promise<number> {
  let completed = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await new Promise<void>((resolve, reject) => {
    worker.on('completed', () => {
      completed++;
      if (completed === total) resolve();
    });
    worker.on('failed', (job, error) => reject(new Error(`job ${job?.id} failed: ${error.message}`)));
  });
  const cpu = process.cpuUsage(cpuBefore);
  if (measuring) cpuMicros[side] += cpu.user + cpu.system;
  return performance.now() - started;
}

/** A fresh prefix per side and round, so both sides start from identical, empty Redis state. */
async function freshContext(base: HatEnv, label: string): Promise<QueueContext> {
  return openQueueContext({ ...base, HAT_REDIS_PREFIX: `${base.HAT_REDIS_PREFIX}-${label}` });
}

async function addNoopJobs(context: QueueContext, runId: string, artifactsRoot: string): Promise<void> {
  const options = stageJobOptions(noopStage.queue ?? {}, context.env.HAT_JOB_DATA_LIMIT);
  // The same job data on both sides: what a real noop stage job carries.
  await context.queue('noop').addBulk(
    Array.from({ length: jobs }, (_, index) => ({
      name: 'stage',
      data: {
        v: 1,
        runId,
        stage: 'noop',
        seed: '0',
        artifactsRoot,
        outputPrefix: `runs/${runId}/noop/`,
        input: { label: 'noop' },
        inputHash: `h${index}`,
      },
      opts: { ...options, jobId: `${runId}.noop.${index}` },
    })),
  );
}

async function timeRaw(base: HatEnv, round: number, artifactsRoot: string): Promise<number> {
  const context = await freshContext(base, `raw${round}`);
  await addNoopJobs(context, `raw${round}`, artifactsRoot);
  const connection = createRedisConnection(context.env, 'worker');
  const processor: Processor = async () => ({ ok: true });
  const worker = new Worker('noop', processor, { connection, prefix: context.prefix, concurrency, autorun: false });
  const elapsed = drain(worker, jobs, 'raw');
  void worker.run();
  const ms = await elapsed;
  await worker.close();
  await connection.quit();
  await context.close();
  return ms;
}

async function timeStage(base: HatEnv, round: number, artifactsRoot: string): Promise<number> {
  const context = await freshContext(base, `stage${round}`);
  await addNoopJobs(context, `stage${round}`, artifactsRoot);
  const connection = createRedisConnection(context.env, 'worker');
  const stores = createStoreCache(context.env);
  const runtime = createStageJobRuntime({ context, stores, logger: silentLogger() });
  const { worker } = createStageWorker(noopStage, runtime, {
    connection,
    prefix: context.prefix,
    concurrency,
    logger: silentLogger(),
    env: context.env,
    sandbox: 'off',
  });
  const ms = await drain(worker, jobs, 'stage');
  await worker.close();
  await connection.quit();
  await stores.close();
  await context.close();
  return ms;
}

async function main(): Promise<void> {
  checkBenchFlags(
    'BENCH_JOBS=5000 BENCH_CONCURRENCY=8 BENCH_ROUNDS=21 BENCH_SIDE=raw|stage node dist/bench/framework.bench.js (settings in the environment, no flags)',
  );
  const prefix = `bench-${randomUUID()}`;
  const directory = await mkdtemp(join(tmpdir(), 'hat-bench-'));
  const artifactsRoot = pathToFileURL(directory).href;
  const env = loadEnv({ ...process.env, HAT_REDIS_PREFIX: prefix, HAT_ARTIFACTS: artifactsRoot });
  const raw: number[] = [];
  const stage: number[] = [];
  try {
    // One discarded warm-up round each (JIT, connections), then alternating measured rounds.
    if (only !== 'stage') await timeRaw(env, 0, artifactsRoot);
    if (only !== 'raw') await timeStage(env, 0, artifactsRoot);
    measuring = true;
    for (let round = 0; round < rounds; round++) {
      if (only) {
        (only === 'raw' ? raw : stage).push(
          await (only === 'raw' ? timeRaw : timeStage)(env, round + 1, artifactsRoot),
        );
        continue;
      }
      // Alternate which side goes first so drift (and neighbours on a shared machine) hit both.
      if (round % 2 === 0) {
        raw.push(await timeRaw(env, round + 1, artifactsRoot));
        stage.push(await timeStage(env, round + 1, artifactsRoot));
      } else {
        stage.push(await timeStage(env, round + 1, artifactsRoot));
        raw.push(await timeRaw(env, round + 1, artifactsRoot));
      }
    }
  } finally {
    const cleaner = await openQueueContext(env);
    await deleteKeysMatching(cleaner.connection, `${prefix}-*`);
    await cleaner.close();
    await rm(directory, { recursive: true, force: true });
  }
  const perSecond = (ms: number) => jobs / (ms / 1_000);
  if (only) {
    const times = only === 'raw' ? raw : stage;
    process.stdout.write(
      `framework overhead, ${only} side alone: median ${median(times.map(perSecond)).toFixed(0)} jobs/s, CPU per job ${(cpuMicros[only] / (jobs * rounds)).toFixed(0)} us\n`,
    );
    return;
  }
  const rawRate = median(raw.map(perSecond));
  const stageRate = median(stage.map(perSecond));
  // Each round's pair ran back to back; the median of their ratios resists a noisy round.
  const ratio = median(raw.map((rawMs, index) => rawMs / stage[index]));
  process.stdout.write(
    [
      `framework overhead: ${jobs} no-op jobs, ${rounds} measured rounds (+1 warm-up), concurrency ${concurrency}`,
      `  raw BullMQ worker:   median ${rawRate.toFixed(0)} jobs/s  (rounds: ${raw.map((ms) => perSecond(ms).toFixed(0)).join(', ')})`,
      `  stage binding:       median ${stageRate.toFixed(0)} jobs/s  (rounds: ${stage.map((ms) => perSecond(ms).toFixed(0)).join(', ')})`,
      `  ratio stage/raw:     median ${ratio.toFixed(2)} of per-round ratios (goal >= 0.90)${ratio >= 0.9 ? '' : '  BELOW GOAL'}`,
      `  CPU per job in this process: raw ${(cpuMicros.raw / (jobs * rounds)).toFixed(0)} us, stage ${(cpuMicros.stage / (jobs * rounds)).toFixed(0)} us (raw/stage ${(cpuMicros.raw / cpuMicros.stage).toFixed(2)})`,
      '',
    ].join('\n'),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
