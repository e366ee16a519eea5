/**
 * Load run (not a test): generated tasks through collect (the scripted teacher), augment (one HSA
 * variant per trajectory, replay-checked) and shard (Qwen3 template and tokenizer, 8192 tokens:
 * the teacher trajectories plus the variants at weight 0.5, as examples/nightly.yaml) on one
 * machine, through real queues and N worker processes, artifacts on the local disk. Prints the
 * wall time of the run and, per stage, its time, parts per second, objects and bytes written
 * (from its manifest); the peak RSS of each worker process (VmHWM, its sandbox threads
 * included); and Redis `used_memory` (INFO memory, sampled every second) next to the baseline:
 * Redis should carry references only, so its memory must not grow with the data.
 *
 *   make build-dev && node dist/bench/load-100k.js [--tasks 100000] [--sizes 10000,100000]
 *     [--text default|cjk-heavy|both] [--tasks-per-part 1000] [--workers 1] [--concurrency C] [--scaling]
 *     [--pin] [--no-augment] [--no-shard] [--cpu-prof DIR] [--keep] [--s3] [--malloc-arena-max 2|unset]
 *
 * `--s3` puts the artifacts on a local S3-compatible server (s3rver) behind a counting proxy and
 * prints the S3 requests of each phase and per part (PUT, multipart calls, GET, HEAD, LIST,
 * DELETE): the figures docs/capacity.md scales from. s3rver is slower than a real bucket, so the
 * times of such a run are not the throughput figures.
 *
 * Memory: each worker's resident set (VmRSS) is sampled every 250 ms and its peak printed per
 * phase (a stage's plan, parts and finish), beside the whole load's VmHWM. `--sizes a,b` runs the
 * load at each size in turn and prints the peaks of the largest against the smallest: flat memory
 * reads 1.0x. `--text cjk-heavy` generates the tasks with production-log-like Chinese text
 * (generate.text); `--text both` runs each size on both mixes and prints each stage's rate on the
 * CJK-heavy mix against the default's.
 *
 * `--scaling` runs the load twice, with one worker process and then with `--workers N` (default
 * 2), and prints each stage's parts/s ratio (N processes / 1). `--concurrency` is passed to every
 * worker (jobs at once per queue; default each stage's). `--pin` runs worker process i on CPU i
 * (mod the CPUs, with taskset), as pods with a one-CPU limit run: on a small machine that is the
 * only way to see whether adding a worker adds throughput, since one unpinned process already
 * spreads its sandbox threads and zlib's thread pool over every core. Each stage also prints the
 * CPU time its worker processes spent while it ran (utime + stime from /proc, sampled every
 * second), per task. `--cpu-prof DIR` writes a CPU profile per
 * worker thread into DIR. Each worker is `hat worker --stages collect,augment,shard,runs` spawned
 * from dist/ (augment and shard in sandboxed worker threads), so the sampler in this process does
 * not compete with it for an event loop. Redis is a private `redis-server` on a free port (so
 * other work on the machine does not show up in its memory), or REDIS_URL with `--shared-redis`,
 * under a fresh `bench-load-<uuid>` prefix per load; everything is removed at the end (unless
 * --keep). Workers run with glibc's `MALLOC_ARENA_MAX=2`, as the worker image sets it (its own
 * value when this process has one; `--malloc-arena-max unset` runs them with glibc's default of
 * eight arenas per core, to compare).
 *
 * After a load with augment, once its workers have exited, this process runs augment's bench
 * loop (`bench/augment-loop.ts`: the augment and replay work alone, on one thread, tasks parsed
 * beforehand, nothing read or written) over one collect part of the load's own trajectories, and
 * prints the pipeline's augment time per trajectory (wall, and worker CPU) against it: the
 * "within 2× of its own benchmark" figure of issue #18, both sides from the same run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readManifest } from '../shared/artifacts/manifest';
import { loadEnv } from '../shared/config/env';
import { enqueueRun } from '../queues/runs/flows';
import { openQueueContext } from '../queues/bullmq/queue-context';
import { planRun } from '../queues/runs/run-config';
import { watchRun, type RunStatus } from '../queues/runs/run-control';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { registerCatalogStages } from '../workers/stage-catalog';
import { deleteKeysMatching } from '../queues/bullmq/redis-connection';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import type { Task } from '../shared/simulator/tasks/task-schema';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { augmentLoopPass, measurePasses, prepareAugmentLoop } from './augment-loop';
import { checkBenchFlags, endsWithThisProcess } from './bench-flags';
import { startS3RequestCounter, s3RequestKinds, type S3RequestCounter } from './s3-request-counter';
import { startLocalS3Server, type LocalS3Server } from '../shared/artifacts/local-s3-server';

registerModelAdapters();

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

function textOption(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
}

function withoutArenaSetting(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const rest = { ...env };
  delete rest.MALLOC_ARENA_MAX;
  return rest;
}

type TextMix = 'default' | 'cjk-heavy';
const textFlag = textOption('--text') ?? 'default';
const textMixes: TextMix[] = textFlag === 'both' ? ['default', 'cjk-heavy'] : [textFlag as TextMix];
const sizes = (textOption('--sizes') ?? String(option('--tasks', 100_000))).split(',').map(Number);
const tasksPerPart = option('--tasks-per-part', 1_000);
const workerCount = option('--workers', process.argv.includes('--scaling') ? 2 : 1);
const concurrency = textOption('--concurrency');
const cpuProfileDirectory = textOption('--cpu-prof');
const scaling = process.argv.includes('--scaling');
const withAugment = !process.argv.includes('--no-augment');
const withShard = !process.argv.includes('--no-shard');
const keep = process.argv.includes('--keep');
const sharedRedis = process.argv.includes('--shared-redis');
const pin = process.argv.includes('--pin');
const withS3 = process.argv.includes('--s3');
/** glibc heap arenas of the workers: the worker image's 2 (docker/Dockerfile), this process's own value, or `unset`. */
const mallocArenaMax = textOption('--malloc-arena-max') ?? process.env.MALLOC_ARENA_MAX ?? '2';

/** The run's phase (`collect parts`, `shard finish`, …): what the S3 request counter files each request under. */
let currentPhase = 'start';

/** With --s3: the local S3-compatible server the workers write to, through the counting proxy. */
interface S3Target {
  server: LocalS3Server;
  counter: S3RequestCounter;
}

/** A private redis-server on a free loopback port, no persistence; resolves once it answers. */
async function startPrivateRedis(directory: string): Promise<{ url: string; process: ChildProcess }> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const child = endsWithThisProcess(
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        directory,
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory-policy',
        'noeviction',
      ],
      { stdio: 'ignore' },
    ),
  );
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

/** Peak resident set of a live process (Linux VmHWM), bytes; undefined elsewhere. */
function peakRss(pid: number | undefined): number | undefined {
  try {
    const kib = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

/** Resident set of a live process now (Linux VmRSS), bytes; undefined elsewhere. */
function currentRss(pid: number | undefined): number | undefined {
  try {
    const kib = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * Which phase of the run the workers are in, from the run's status: the first stage not done,
 * and whether it is planning (no parts listed yet), running its parts, or in its fan-in (every
 * part done, the stage not yet).
 */
function phaseOf(status: RunStatus): string {
  const stage = status.stages.find((candidate) => candidate.state !== 'completed');
  if (!stage) return 'done';
  if (stage.partsTotal === 0) return `${stage.name} plan`;
  return stage.partsDone < stage.partsTotal ? `${stage.name} parts` : `${stage.name} finish`;
}

/** CPU seconds (every thread) a process has used in user and in system mode, from /proc/<pid>/stat. */
function cpuSecondsOf(pid: number | undefined): { user: number; system: number } {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5) (utime, stime), in clock ticks of 1/100 s on Linux.
    return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
  } catch {
    return { user: 0, system: 0 };
  }
}

interface CpuSample {
  at: number;
  user: number;
  system: number;
}

/** The workers' total CPU seconds (`field`) at `at` (epoch ms), interpolated between one-second samples. */
function cpuAt(samples: readonly CpuSample[], at: number, field: 'user' | 'system'): number | undefined {
  if (samples.length === 0 || at < samples[0].at) return undefined;
  for (let index = 1; index < samples.length; index++) {
    const before = samples[index - 1];
    const after = samples[index];
    if (at <= after.at)
      return before[field] + ((after[field] - before[field]) * (at - before.at)) / (after.at - before.at);
  }
  return samples.at(-1)![field];
}

interface StageFigures {
  name: string;
  seconds?: number;
  /** CPU seconds of the worker processes while the stage ran (user + system), and the system part. */
  cpuSeconds?: number;
  systemSeconds?: number;
  /** From the first part seen to the last part done (the plan before and the fan-in after excluded), seen by polling. */
  partsSeconds?: number;
  parts: number;
  objects: number;
  bytes: number;
}

interface LoadResult {
  tasks: number;
  text: TextMix;
  workers: number;
  state: string;
  wallSeconds: number;
  stages: StageFigures[];
  /** Peak resident set per worker process over the whole load (VmHWM), bytes. */
  peakRss: Array<number | undefined>;
  /** Per phase (`shard parts`, `shard finish`, …), in the order first seen: the largest VmRSS sampled, per worker. */
  phaseRss: Map<string, number[]>;
}

/**
 * Augment's bench loop over the trajectories of the load's first collect part (tasks parsed
 * beforehand), median of three passes, against the pipeline's augment stage per trajectory.
 */
async function compareAugmentWithLoop(
  stores: ReturnType<typeof createStoreCache>,
  collectManifestUri: string,
  augment: StageFigures,
  augmentInput: { variantPool: number; variantsPerTrajectory: number; seed?: string },
  runSeed: string,
  tasks: number,
): Promise<void> {
  const { store, key } = stores.openObject(collectManifestUri);
  const manifest = await readManifest(store, key);
  const trajectoryObject = manifest.objects.find((object) => object.kind === 'trajectories');
  if (!trajectoryObject) throw new Error(`${collectManifestUri} lists no trajectories object`);
  const lines: string[] = [];
  const wanted = new Set<string>();
  const opened = stores.openObject(trajectoryObject.uri);
  for await (const trajectory of readJsonl<Trajectory>(opened.store, opened.key)) {
    lines.push(JSON.stringify(trajectory));
    wanted.add(trajectory.taskId);
  }
  const tasksById = new Map<string, Task>();
  for (const object of manifest.objects) {
    if (object.kind !== 'tasks') continue;
    const tasksObject = stores.openObject(object.uri);
    for await (const task of readJsonl<Task>(tasksObject.store, tasksObject.key))
      if (wanted.has(task.id)) tasksById.set(task.id, task);
    if (tasksById.size === wanted.size) break;
  }
  // The pool the load's augment stage drew (its planned input; no harness given: the sample one).
  const loop = prepareAugmentLoop(await loadHarness(sampleHarnessDirectory()), {
    pool: augmentInput.variantPool,
    seed: augmentInput.seed ?? runSeed,
    variants: augmentInput.variantsPerTrajectory,
  });
  const [measured] = measurePasses(3, lines.length, [() => augmentLoopPass(loop, lines, tasksById, true).written]);
  const loopMs = 1_000 / measured.linesPerSecond;
  const loopCpuMs = measured.cpuMicrosPerLine / 1_000;
  const wallMs = ((augment.seconds ?? Number.NaN) * 1_000) / tasks;
  const cpuMs = augment.cpuSeconds === undefined ? undefined : (augment.cpuSeconds * 1_000) / tasks;
  process.stdout.write(
    [
      `augment in the pipeline vs its bench loop (the augment and replay work alone, one thread, median of 3 passes over this load's ${lines.length} trajectories of collect part 0; its CPU counts V8's collector threads, as the worker's does): loop ${loopMs.toFixed(3)} ms per trajectory (CPU ${loopCpuMs.toFixed(3)} ms)`,
      `  pipeline: ${wallMs.toFixed(3)} ms of stage wall time per trajectory -> ${(wallMs / loopMs).toFixed(2)}x the loop (goal <= 2x${pin ? '; the workers were pinned to one CPU each and the loop is not, so compare CPU' : ''})${cpuMs === undefined ? '' : `; worker CPU ${cpuMs.toFixed(3)} ms per trajectory -> ${(cpuMs / loopCpuMs).toFixed(2)}x the loop's CPU`}`,
      '',
    ].join('\n'),
  );
}

function reportLoopFailure(error: unknown): void {
  process.stderr.write(
    `augment bench loop after the load failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exitCode = 1;
}

async function runLoad(
  redisUrl: string,
  tasks: number,
  workers: number,
  usesPrivateRedis: boolean,
  text: TextMix,
  s3: S3Target | undefined,
): Promise<LoadResult> {
  const prefix = `bench-load-${randomUUID()}`;
  const directory = await mkdtemp(join(tmpdir(), 'hat-load-'));
  const s3Env = s3 ? { ...s3.server.env, S3_ENDPOINT: s3.counter.endpoint } : {};
  const env = loadEnv({
    ...process.env,
    ...s3Env,
    REDIS_URL: redisUrl,
    HAT_REDIS_PREFIX: prefix,
    HAT_ARTIFACTS: s3 ? `s3://${s3.server.bucket}/${prefix}` : pathToFileURL(join(directory, 'artifacts')).href,
    HAT_LOG_LEVEL: 'warn',
  });
  s3?.counter.counts.clear();
  const context = await openQueueContext(env, { role: 'worker' });
  const stores = createStoreCache(env);
  const stageNames = ['collect', ...(withAugment ? ['augment'] : []), ...(withShard ? ['shard'] : []), 'runs'];
  const nodeArguments = cpuProfileDirectory ? ['--cpu-prof', '--cpu-prof-dir', cpuProfileDirectory] : [];
  const cpus = availableParallelism();
  const children = Array.from({ length: workers }, (_, index) =>
    endsWithThisProcess(
      spawn(
        pin ? 'taskset' : process.execPath,
        [
          ...(pin ? ['-c', String(index % cpus), process.execPath] : []),
          ...nodeArguments,
          join(__dirname, '..', 'cli', 'main.js'),
          'worker',
          '--stages',
          stageNames.join(','),
          ...(concurrency ? ['--concurrency', concurrency] : []),
        ],
        {
          env: {
            ...withoutArenaSetting(process.env),
            ...(mallocArenaMax === 'unset' ? {} : { MALLOC_ARENA_MAX: mallocArenaMax }),
            ...s3Env,
            REDIS_URL: redisUrl,
            HAT_REDIS_PREFIX: prefix,
            HAT_ARTIFACTS: env.HAT_ARTIFACTS,
            HAT_LOG_LEVEL: 'warn',
          },
          stdio: ['ignore', 'inherit', 'inherit'],
        },
      ),
    ),
  );
  const samples: number[] = [];
  const baseline = usedMemory(await context.connection.info('memory'));
  let peakKeys = 0;
  const cpuSamples: CpuSample[] = [];
  let phase = 'collect plan';
  currentPhase = phase;
  const phaseRss = new Map<string, number[]>();
  const sampleRss = () => {
    const peaks = phaseRss.get(phase) ?? children.map(() => 0);
    phaseRss.set(phase, peaks);
    children.forEach((child, index) => (peaks[index] = Math.max(peaks[index], currentRss(child.pid) ?? 0)));
  };
  // Resident sets every 250 ms (a phase's peak can last less than a second), CPU and Redis every second.
  const rssSampler = setInterval(sampleRss, 250);
  const sampler = setInterval(() => {
    const sample: CpuSample = { at: Date.now(), user: 0, system: 0 };
    for (const child of children) {
      const cpu = cpuSecondsOf(child.pid);
      sample.user += cpu.user;
      sample.system += cpu.system;
    }
    cpuSamples.push(sample);
    void context.connection.info('memory').then(
      (info) => samples.push(usedMemory(info)),
      () => undefined,
    );
    if (usesPrivateRedis)
      void context.connection.dbsize().then(
        (size) => (peakKeys = Math.max(peakKeys, size)),
        () => undefined,
      );
  }, 1_000);
  // Set once the load has completed with augment: runs augment's bench loop after the workers exit.
  let augmentAgainstLoop: (() => Promise<void>) | undefined;
  try {
    const stages: Record<string, unknown> = {
      collect: { generate: { count: tasks, seed: 'load-100k', itemCount: 2000, text }, tasksPerPart },
    };
    if (withAugment) {
      stages.augment = {
        trajectories: ['${stages.collect.manifestUri}'],
        tasks: ['${stages.collect.manifestUri}'],
        variantsPerTrajectory: 1,
        recordsPerPart: tasksPerPart,
      };
    }
    if (withShard) {
      stages.shard = {
        inputs: [
          { uri: '${stages.collect.manifestUri}', name: 'teacher' },
          ...(withAugment ? [{ uri: '${stages.augment.manifestUri}', weight: 0.5, name: 'hsa' }] : []),
        ],
        tokenizer: { preset: 'qwen3' },
        sequenceLength: 8192,
        recordsPerPart: tasksPerPart,
      };
    }
    const plan = planRun({ runId: `load-${tasks}-${text}`, seed: 'load', stages }, { env, now: new Date() });
    const started = Date.now();
    await enqueueRun(context, plan);
    let last = '';
    // Per stage: when its parts were first listed and when the last one was done (polled every 500 ms).
    const partsPhase = new Map<string, { from?: number; to?: number }>();
    const status: RunStatus = await watchRun(context, plan.runId, {
      intervalMs: 500,
      onStatus: (current) => {
        const now = Date.now();
        sampleRss();
        phase = phaseOf(current);
        currentPhase = phase;
        for (const stage of current.stages) {
          const phase = partsPhase.get(stage.name) ?? {};
          if (stage.partsTotal > 0 && phase.from === undefined) phase.from = now;
          if (stage.partsTotal > 0 && stage.partsDone >= stage.partsTotal && phase.to === undefined) phase.to = now;
          partsPhase.set(stage.name, phase);
        }
        const line = current.stages
          .map((stage) => `${stage.name} ${stage.state} ${stage.partsDone}/${stage.partsTotal}`)
          .join(', ');
        if (line !== last) process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0)} s] ${line}\n`);
        last = line;
      },
    });
    const wallSeconds = (Date.now() - started) / 1000;
    const peak = Math.max(baseline, ...samples);
    const rss = children.map((child) => peakRss(child.pid));
    const figures: StageFigures[] = [];
    for (const stage of status.stages) {
      let objects = 0;
      let bytes = 0;
      if (stage.manifestUri) {
        const { store, key } = stores.openObject(stage.manifestUri);
        const manifest = await readManifest(store, key);
        objects = manifest.objects.length;
        bytes = manifest.objects.reduce((sum, object) => sum + object.bytes, 0);
      }
      const seconds =
        stage.startedAt && stage.finishedAt
          ? (Date.parse(stage.finishedAt) - Date.parse(stage.startedAt)) / 1000
          : undefined;
      const during = (field: 'user' | 'system') => {
        const from = stage.startedAt ? cpuAt(cpuSamples, Date.parse(stage.startedAt), field) : undefined;
        const to = stage.finishedAt ? cpuAt(cpuSamples, Date.parse(stage.finishedAt), field) : undefined;
        return from !== undefined && to !== undefined ? to - from : undefined;
      };
      const user = during('user');
      const systemSeconds = during('system');
      const cpuSeconds = user !== undefined && systemSeconds !== undefined ? user + systemSeconds : undefined;
      const phase = partsPhase.get(stage.name);
      const partsSeconds =
        phase?.from !== undefined && phase.to !== undefined ? (phase.to - phase.from) / 1000 : undefined;
      figures.push({
        name: stage.name,
        seconds,
        cpuSeconds,
        systemSeconds,
        partsSeconds,
        parts: stage.partsTotal,
        objects,
        bytes,
      });
    }
    process.stdout.write(
      [
        `load run ${plan.runId}: ${status.state}${status.error ? ` (${status.error})` : ''}`,
        `  tasks: ${tasks} (${tasksPerPart} per part, ${text} text), stages: ${plan.stages.map((stage) => stage.name).join(' -> ')}${withAugment ? ' (augment: 1 variant per trajectory, replay-checked)' : ''}${withShard ? ' (shard: qwen3, 8192)' : ''}`,
        `  workers: ${workers} process(es)${pin ? ', each pinned to one CPU' : ''}${concurrency ? `, concurrency ${concurrency}` : ''}, MALLOC_ARENA_MAX ${mallocArenaMax}; wall time: ${wallSeconds.toFixed(1)} s (${(tasks / wallSeconds).toFixed(0)} tasks/s end to end)`,
        ...figures.map(
          (stage) =>
            `  ${stage.name}: ${stage.seconds !== undefined ? `${stage.seconds.toFixed(1)} s, ${(stage.parts / stage.seconds).toFixed(2)} parts/s` : '?'}, ${stage.parts} parts (parts phase ${stage.partsSeconds?.toFixed(1) ?? '?'} s), ${stage.objects} objects, ${mib(stage.bytes)} written, worker CPU ${stage.cpuSeconds === undefined ? '?' : `${stage.cpuSeconds.toFixed(1)} s (${((stage.cpuSeconds * 1000) / tasks).toFixed(2)} ms per task; system ${stage.systemSeconds?.toFixed(1)} s)`}`,
        ),
        `  peak RSS per worker (VmHWM): ${rss.map((bytes) => (bytes === undefined ? '?' : mib(bytes))).join(', ')}`,
        `  peak RSS per worker by phase (VmRSS sampled every 250 ms): ${[...phaseRss].map(([name, peaks]) => `${name} ${peaks.map(mib).join(' / ')}`).join('; ')}`,
        ...(s3 ? s3RequestLines(s3.counter, figures) : []),
        `  Redis used_memory (${usesPrivateRedis ? 'private redis-server' : `shared ${redisUrl}: other clients count too`}): baseline ${mib(baseline)}, peak ${mib(peak)} (+${mib(peak - baseline)}) over ${samples.length} one-second samples${usesPrivateRedis ? `; at most ${peakKeys} keys` : ''}`,
        '',
      ].join('\n'),
    );
    const collectUri = status.stages.find((stage) => stage.name === 'collect')?.manifestUri;
    const augmentFigures = figures.find((stage) => stage.name === 'augment');
    const augmentInput = plan.stages.find((stage) => stage.name === 'augment')?.input as
      { variantPool: number; variantsPerTrajectory: number; seed?: string } | undefined;
    if (status.state === 'completed' && collectUri && augmentInput && augmentFigures?.seconds !== undefined)
      augmentAgainstLoop = () =>
        compareAugmentWithLoop(stores, collectUri, augmentFigures, augmentInput, plan.seed, tasks);
    return { tasks, text, workers, state: status.state, wallSeconds, stages: figures, peakRss: rss, phaseRss };
  } finally {
    clearInterval(sampler);
    clearInterval(rssSampler);
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(
      children.map((child) =>
        child.exitCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve)),
      ),
    );
    if (augmentAgainstLoop) await augmentAgainstLoop().catch((error: unknown) => reportLoopFailure(error));
    if (!keep) {
      await deleteKeysMatching(context.connection, `${prefix}:*`);
      await rm(directory, { recursive: true, force: true });
    } else {
      process.stdout.write(`kept: Redis prefix ${prefix}, artifacts ${directory}\n`);
    }
    await stores.close();
    await context.close();
  }
}

/**
 * With --s3: the S3 requests of each phase (retries included), and per part of each stage: what a
 * bucket bills and rate-limits, from which docs/capacity.md scales to larger nights.
 */
function s3RequestLines(counter: S3RequestCounter, figures: StageFigures[]): string[] {
  const lines = ['  S3 requests by phase (through a counting proxy; multipart = create, part and complete calls):'];
  for (const [label, row] of counter.counts) {
    const total = s3RequestKinds.reduce((sum, kind) => sum + row[kind], 0);
    const stage = figures.find((candidate) => label === `${candidate.name} parts`);
    const perPart = stage && stage.parts > 0 ? `, ${(total / stage.parts).toFixed(1)} per part` : '';
    const kinds = s3RequestKinds.filter((kind) => row[kind] > 0).map((kind) => `${kind} ${row[kind]}`);
    lines.push(`    ${label}: ${total} (${kinds.join(', ')})${perPart}`);
  }
  return lines;
}

/**
 * Each stage's rate on the CJK-heavy mix against the default mix at the same size and workers
 * (goal >= 0.7): the same tasks, longer Chinese text (generate.text).
 */
function printTextMix(results: LoadResult[]): void {
  const [first] = results;
  process.stdout.write(
    `text mix at ${first.tasks} tasks, cjk-heavy vs default (goal >= 0.7 of the default's rate per stage):\n`,
  );
  for (const cjk of results.filter((result) => result.text === 'cjk-heavy')) {
    const base = results.find((result) => result.text === 'default' && result.workers === cjk.workers);
    for (const stage of cjk.stages) {
      const other = base?.stages.find((candidate) => candidate.name === stage.name);
      const ratio = stage.seconds && other?.seconds ? other.seconds / stage.seconds : undefined;
      const cpu = stage.cpuSeconds && other?.cpuSeconds ? other.cpuSeconds / stage.cpuSeconds : undefined;
      process.stdout.write(
        `  ${stage.name} (${cjk.workers} worker${cjk.workers > 1 ? 's' : ''}): ${ratio === undefined ? '?' : ratio.toFixed(2)}x the default's tasks/s (${other?.seconds?.toFixed(1)} s -> ${stage.seconds?.toFixed(1)} s); per CPU second ${cpu === undefined ? '?' : cpu.toFixed(2)}x\n`,
      );
    }
  }
}

function printScaling(one: LoadResult, many: LoadResult): void {
  process.stdout.write(
    `scaling at ${one.tasks} tasks, ${many.workers} worker processes vs 1 (goal >= 1.8 for every whole stage: its plan, parts and fan-in, the fan-in tasks on any worker):\n`,
  );
  for (const stage of one.stages) {
    const other = many.stages.find((candidate) => candidate.name === stage.name);
    const ratio = stage.seconds && other?.seconds ? stage.seconds / other.seconds : undefined;
    const partsRatio = stage.partsSeconds && other?.partsSeconds ? stage.partsSeconds / other.partsSeconds : undefined;
    process.stdout.write(
      `  ${stage.name}: parts ${partsRatio === undefined ? '?' : partsRatio.toFixed(2)}x (${stage.partsSeconds?.toFixed(1)} s -> ${other?.partsSeconds?.toFixed(1)} s); whole stage ${ratio === undefined ? '?' : ratio.toFixed(2)}x (${stage.seconds?.toFixed(1)} s -> ${other?.seconds?.toFixed(1)} s)\n`,
    );
  }
  process.stdout.write(
    `  wall: ${(one.wallSeconds / many.wallSeconds).toFixed(2)}x (${one.wallSeconds.toFixed(1)} s -> ${many.wallSeconds.toFixed(1)} s)\n`,
  );
}

/**
 * Peak resident set of the first worker at each size against the smallest size, over the whole
 * load and per phase: flat memory reads 1.0x whatever the size (goal <= 1.1x, and <= 1.5 GiB).
 */
function printMemoryBySize(results: LoadResult[]): void {
  const [smallest] = results;
  const largest = results.at(-1)!;
  const ratio = (large: number | undefined, small: number | undefined) =>
    large && small ? `${(large / small).toFixed(2)}x` : '?';
  process.stdout.write(
    `memory by size, worker 1 (goal: peak at the largest size <= 1.1x the smallest's, and <= 1.5 GiB):\n`,
  );
  for (const result of results.slice(1))
    process.stdout.write(
      `  peak RSS (VmHWM) ${result.tasks} vs ${smallest.tasks} tasks: ${mib(result.peakRss[0] ?? 0)} vs ${mib(smallest.peakRss[0] ?? 0)} -> ${ratio(result.peakRss[0], smallest.peakRss[0])}${result === largest ? ((result.peakRss[0] ?? Infinity) <= 1.5 * 1024 ** 3 ? ' (within 1.5 GiB)' : ' (over 1.5 GiB)') : ''}\n`,
    );
  for (const [phase, peaks] of largest.phaseRss) {
    const small = smallest.phaseRss.get(phase)?.[0];
    process.stdout.write(
      `  ${phase}: ${mib(peaks[0])} vs ${small === undefined ? '?' : mib(small)} -> ${ratio(peaks[0], small)}\n`,
    );
  }
}

async function main(): Promise<void> {
  checkBenchFlags(
    'node dist/bench/load-100k.js [--tasks 100000] [--sizes 10000,100000] [--text default|cjk-heavy|both] [--tasks-per-part 1000] [--workers 1] [--concurrency C] [--scaling] [--pin] [--no-augment] [--no-shard] [--cpu-prof DIR] [--keep] [--shared-redis] [--s3] [--malloc-arena-max 2|unset]',
  );
  if (mallocArenaMax !== 'unset' && !/^[1-9][0-9]*$/.test(mallocArenaMax)) {
    process.stderr.write(`--malloc-arena-max must be a whole number of arenas or unset, not ${mallocArenaMax}\n`);
    process.exit(2);
  }
  if (!['default', 'cjk-heavy', 'both'].includes(textFlag)) {
    process.stderr.write(`--text must be default, cjk-heavy or both, not ${textFlag}\n`);
    process.exit(2);
  }
  registerCatalogStages();
  const directory = await mkdtemp(join(tmpdir(), 'hat-load-redis-'));
  const redis = sharedRedis ? undefined : await startPrivateRedis(directory);
  let s3: S3Target | undefined;
  if (withS3) {
    const server = await startLocalS3Server({ bucket: 'hat-load' });
    s3 = { server, counter: await startS3RequestCounter(server.endpoint, () => currentPhase) };
  }
  const redisUrl = redis?.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  try {
    const results: LoadResult[] = [];
    for (const tasks of sizes) {
      for (const text of textMixes) {
        const forSize: LoadResult[] = [];
        for (const workers of scaling ? [1, workerCount] : [workerCount])
          forSize.push(await runLoad(redisUrl, tasks, workers, redis !== undefined, text, s3));
        if (scaling) printScaling(forSize[0], forSize[1]);
        results.push(...forSize);
      }
      if (textMixes.length > 1) printTextMix(results.filter((result) => result.tasks === tasks));
    }
    if (sizes.length > 1)
      printMemoryBySize(
        results.filter((result) => result.workers === results[0].workers && result.text === textMixes[0]),
      );
    if (results.some((result) => result.state !== 'completed')) process.exitCode = 1;
  } finally {
    redis?.process.kill('SIGTERM');
    await s3?.counter.close();
    await s3?.server.stop();
    await rm(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
