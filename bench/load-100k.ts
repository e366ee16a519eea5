/**
 * Load run (not a test): 100,000 generated tasks through collect (the scripted teacher) and
 * augment (one HSA variant per trajectory, replay-checked) on one machine, through real queues
 * and one worker process, artifacts on the local disk. Samples Redis `used_memory` (INFO memory)
 * every second and prints the peak next to the baseline, with the wall time of the run and of
 * each stage: Redis should carry references only, so its memory must not grow with the data.
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/load-100k.js [--tasks 100000] [--tasks-per-part 1000] [--no-augment] [--keep]
 *
 * The worker is `hat worker --stages collect,augment,runs` spawned from dist/ (augment in
 * sandboxed worker threads), so the sampler in this process does not compete with it for an
 * event loop. Redis is a private `redis-server` on a free port (so other work on the machine does
 * not show up in its memory), or REDIS_URL with `--shared-redis`, under a fresh
 * `bench-load-<uuid>` prefix; everything is removed at the end (unless --keep).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadEnv } from '../shared/config/env';
import { enqueueRun } from '../queues/runs/flows';
import { openQueueContext } from '../queues/bullmq/queue-context';
import { planRun } from '../queues/runs/run-config';
import { watchRun, type RunStatus } from '../queues/runs/run-control';
import { registerCatalogStages } from '../workers/stage-catalog';
import { deleteKeysMatching } from '../queues/bullmq/redis-connection';

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const tasks = option('--tasks', 100_000);
const tasksPerPart = option('--tasks-per-part', 1_000);
const withAugment = !process.argv.includes('--no-augment');
const keep = process.argv.includes('--keep');
const sharedRedis = process.argv.includes('--shared-redis');

/** A private redis-server on a free loopback port, no persistence; resolves once it answers. */
async function startPrivateRedis(directory: string): Promise<{ url: string; process: ChildProcess }> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', directory, '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 100; attempt++) {
    const context = await openQueueContext(loadEnv({ REDIS_URL: url }), { role: 'producer' }).catch(() => undefined);
    if (context) {
      await context.close();
      return { url, process: child };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on ${url}; install it or pass --shared-redis`);
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function usedMemory(info: string): number {
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0);
}

async function main(): Promise<void> {
  registerCatalogStages();
  const prefix = `bench-load-${randomUUID()}`;
  const directory = await mkdtemp(join(tmpdir(), 'hat-load-'));
  const redis = sharedRedis ? undefined : await startPrivateRedis(directory);
  const redisUrl = redis?.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const env = loadEnv({ ...process.env, REDIS_URL: redisUrl, HAT_REDIS_PREFIX: prefix, HAT_ARTIFACTS: pathToFileURL(join(directory, 'artifacts')).href, HAT_LOG_LEVEL: 'warn' });
  const context = await openQueueContext(env, { role: 'worker' });
  const worker = spawn(process.execPath, [join(__dirname, '..', 'cli', 'main.js'), 'worker', '--stages', withAugment ? 'collect,augment,runs' : 'collect,runs'], {
    env: { ...process.env, REDIS_URL: redisUrl, HAT_REDIS_PREFIX: prefix, HAT_ARTIFACTS: env.HAT_ARTIFACTS, HAT_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const samples: number[] = [];
  const baseline = usedMemory(await context.connection.info('memory'));
  let peakKeys = 0;
  const sampler = setInterval(() => {
    void context.connection.info('memory').then((info) => samples.push(usedMemory(info)), () => undefined);
    if (redis) void context.connection.dbsize().then((size) => (peakKeys = Math.max(peakKeys, size)), () => undefined);
  }, 1_000);
  try {
    const stages: Record<string, unknown> = { collect: { generate: { count: tasks, seed: 'load-100k', itemCount: 2000 }, tasksPerPart } };
    if (withAugment) {
      stages.augment = {
        trajectories: ['${stages.collect.manifestUri}'],
        tasks: ['${stages.collect.manifestUri}'],
        variantsPerTrajectory: 1,
        recordsPerPart: tasksPerPart,
      };
    }
    const plan = planRun({ runId: `load-${tasks}`, seed: 'load', stages }, { env, now: new Date() });
    const started = Date.now();
    await enqueueRun(context, plan);
    let last = '';
    const status: RunStatus = await watchRun(context, plan.runId, {
      intervalMs: 2_000,
      onStatus: (current) => {
        const line = current.stages.map((stage) => `${stage.name} ${stage.state} ${stage.partsDone}/${stage.partsTotal}`).join(', ');
        if (line !== last) process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${line}\n`);
        last = line;
      },
    });
    const wallSeconds = (Date.now() - started) / 1000;
    const peak = Math.max(baseline, ...samples);
    process.stdout.write(
      [
        `load run ${plan.runId}: ${status.state}${status.error ? ` (${status.error})` : ''}`,
        `  tasks: ${tasks} (${tasksPerPart} per part), stages: ${plan.stages.map((stage) => stage.name).join(' -> ')}${withAugment ? ' (1 variant per trajectory, replay-checked)' : ''}`,
        `  wall time: ${wallSeconds.toFixed(1)} s (${(tasks / wallSeconds).toFixed(0)} tasks/s end to end)`,
        ...status.stages.map((stage) => `  ${stage.name}: ${stage.startedAt && stage.finishedAt ? `${((Date.parse(stage.finishedAt) - Date.parse(stage.startedAt)) / 1000).toFixed(1)} s` : '?'}, ${stage.partsTotal} parts`),
        `  Redis used_memory (${redis ? 'private redis-server' : `shared ${redisUrl}: other clients count too`}): baseline ${mib(baseline)}, peak ${mib(peak)} (+${mib(peak - baseline)}) over ${samples.length} one-second samples${redis ? `; at most ${peakKeys} keys` : ''}`,
        '',
      ].join('\n'),
    );
    if (status.state !== 'completed') process.exitCode = 1;
  } finally {
    clearInterval(sampler);
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
    if (!keep) {
      await deleteKeysMatching(context.connection, `${prefix}:*`);
      await rm(directory, { recursive: true, force: true });
    } else {
      process.stdout.write(`kept: Redis prefix ${prefix}, artifacts ${directory}\n`);
    }
    await context.close();
    redis?.process.kill('SIGTERM');
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
