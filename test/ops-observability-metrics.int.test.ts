import { networkInterfaces } from 'node:os';
import { z } from 'zod';
import { writeManifest } from '../shared/artifacts/manifest';
import { parsePrometheusText, type PrometheusSample } from '../shared/metrics/prometheus-text';
import { startMetricsServer, type MetricsServer } from '../shared/metrics/prometheus-server';
import { defineStage } from '../queues/stage-kit/define-stage';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { registerStage, unregisterStage } from '../queues/stage-kit/stage-registry';
import type { CollectOutput } from '../workers/collect/collect-contract';
import type { WorkerPool } from '../workers/worker-pool';
import { startHat, type HatProcess } from './support/hat-process';
import { freePort } from './support/free-port';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * Rule 1 of stage counters: parts report `counters`. Its stage output and manifest also carry a
 * `trajectories` figure, which must not be counted a second time.
 */
const partCountersStage = defineStage({
  name: 'metrics-parts-demo',
  description: 'test stage: parts report counters',
  input: z.object({ parts: z.number().int().positive() }).strict(),
  output: z.object({ manifestUri: z.string(), counters: z.record(z.string(), z.number()) }),
  partInput: z.object({ index: z.number().int() }),
  partOutput: z.object({ counters: z.object({ trajectories: z.number(), tokens: z.number() }) }),
  plan: (input) => Array.from({ length: input.parts }, (_, index) => ({ index })),
  createProcessor: () => async (part) => ({ counters: { trajectories: 2, tokens: 100 + part.index } }),
  async finish(_input, parts, deps) {
    const { info } = await writeManifest(deps.store, deps.output.manifestKey, {
      stage: deps.stage,
      runId: deps.run.id,
      objects: [],
      lineage: { inputs: [], configHash: 'test' },
      stats: { trajectories: 999 },
    });
    return { manifestUri: info.uri, counters: { trajectories: 999 + parts.length } };
  },
});

/** Rule 2: a single-job stage whose output carries `counters` (its manifest stats are ignored). */
const outputCountersStage = defineStage({
  name: 'metrics-single-demo',
  description: 'test stage: the stage output reports counters',
  input: z.object({}).strict(),
  output: z.object({ manifestUri: z.string(), counters: z.object({ episodes: z.number() }) }),
  createProcessor: (deps) => async () => {
    const { info } = await writeManifest(deps.store, deps.output.manifestKey, {
      stage: deps.stage,
      runId: deps.run.id,
      objects: [],
      lineage: { inputs: [], configHash: 'test' },
      stats: { episodes: 777 },
    });
    return { manifestUri: info.uri, counters: { episodes: 5 } };
  },
});

function sample(samples: PrometheusSample[], name: string, labels: Record<string, string>): number | undefined {
  return samples.find(
    (entry) => entry.name === name && Object.entries(labels).every(([key, value]) => entry.labels[key] === value),
  )?.value;
}

async function scrape(
  url: string,
): Promise<{ status: number; contentType: string | null; samples: PrometheusSample[] }> {
  const response = await fetch(url);
  const text = await response.text();
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    samples: response.ok ? parsePrometheusText(text, url) : [],
  };
}

describe('worker metrics (Prometheus)', () => {
  let kit: QueueTestKit;
  let server: MetricsServer | undefined;
  beforeAll(() => {
    registerStage(partCountersStage);
    registerStage(outputCountersStage);
  });
  afterAll(() => {
    unregisterStage(partCountersStage.name);
    unregisterStage(outputCountersStage.name);
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await kit.cleanup();
  });

  it('serves queue depths, job durations, retries, failures by code, completions and stage counters after a small run', async () => {
    const pool: WorkerPool = await kit.startWorkers({
      queues: ['fanout-demo', 'collect', partCountersStage.name, outputCountersStage.name, 'runs'],
      concurrency: 2,
      metrics: { depthCacheMs: 0 },
    });
    expect(pool.metrics).toBeDefined();
    server = await startMetricsServer(pool.metrics!, { port: 0, host: '127.0.0.1' });

    const plan = (config: unknown) => planRun(config, { env: kit.env, now: new Date() });
    await enqueueRun(
      kit.context,
      plan({
        runId: 'good',
        stages: {
          'fanout-demo': { parts: 3, recordsPerPart: 4, faults: { transientOnFirstAttempt: [1] } },
          collect: { generate: { count: 12, seed: 3 }, tasksPerPart: 6 },
          [partCountersStage.name]: { parts: 4 },
          [outputCountersStage.name]: {},
        },
      }),
    );
    const goodStatus = await watchRun(kit.context, 'good', { intervalMs: 100 });
    expect(goodStatus.state).toBe('completed');
    await enqueueRun(
      kit.context,
      plan({ runId: 'bad', stages: { 'fanout-demo': { parts: 1, faults: { badInput: [0] } } } }),
    );
    expect((await watchRun(kit.context, 'bad', { intervalMs: 100 })).state).toBe('failed');
    // A job nobody takes yet: the depth gauge must show it.
    await kit.context.queue('fanout-demo').add('parked', { note: 'depth probe' }, { delay: 600_000, jobId: 'parked' });

    const { status, contentType, samples } = await scrape(server.url);
    expect(status).toBe(200);
    expect(contentType).toContain('text/plain');

    // Completions: 3 parts + 1 stage job of fanout-demo in run "good"; the runs queue finished one run.
    expect(sample(samples, 'hat_jobs_completed_total', { queue: 'fanout-demo', job: 'part' })).toBe(3);
    expect(sample(samples, 'hat_jobs_completed_total', { queue: 'fanout-demo', job: 'stage' })).toBe(1);
    expect(sample(samples, 'hat_jobs_completed_total', { queue: partCountersStage.name, job: 'part' })).toBe(4);
    expect(sample(samples, 'hat_jobs_completed_total', { queue: 'runs', job: 'run' })).toBe(1);
    // The transient fault was retried once; the bad part failed for good, and so did run "bad".
    expect(sample(samples, 'hat_job_retries_total', { queue: 'fanout-demo', code: 'DEMO_TRANSIENT' })).toBe(1);
    expect(sample(samples, 'hat_job_failures_total', { queue: 'fanout-demo', code: 'DEMO_BAD_PART' })).toBe(1);
    expect(sample(samples, 'hat_job_failures_total', { queue: 'runs', code: 'RUN_FAILED' })).toBe(1);
    // Durations: one observation per completed part, and the stage job from plan to fan-in.
    expect(
      sample(samples, 'hat_job_duration_seconds_count', { queue: 'fanout-demo', job: 'part', outcome: 'completed' }),
    ).toBe(3);
    expect(
      sample(samples, 'hat_job_duration_seconds_count', { queue: 'fanout-demo', job: 'part', outcome: 'failed' }),
    ).toBe(2);
    expect(
      sample(samples, 'hat_job_duration_seconds_count', { queue: 'fanout-demo', job: 'stage', outcome: 'completed' }),
    ).toBe(1);
    expect(
      sample(samples, 'hat_job_duration_seconds_bucket', {
        queue: 'fanout-demo',
        job: 'stage',
        outcome: 'completed',
        le: '+Inf',
      }),
    ).toBe(1);

    // Stage counters, by each of the three rules.
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'fanout-demo', counter: 'records' })).toBe(12);
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'fanout-demo', counter: 'parts' })).toBe(3);
    expect(sample(samples, 'hat_stage_counter_total', { stage: partCountersStage.name, counter: 'trajectories' })).toBe(
      8,
    );
    expect(sample(samples, 'hat_stage_counter_total', { stage: partCountersStage.name, counter: 'tokens' })).toBe(
      100 + 101 + 102 + 103,
    );
    expect(sample(samples, 'hat_stage_counter_total', { stage: outputCountersStage.name, counter: 'episodes' })).toBe(
      5,
    );
    // A pipeline stage counts by its contract as parts complete: they add up to the stage output.
    const collected = (await kit.context.queue('collect').getCompleted()).find((job) => job.name === 'stage')
      ?.returnvalue.output as CollectOutput;
    expect(sample(samples, 'hat_jobs_completed_total', { queue: 'collect', job: 'part' })).toBe(2);
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'collect', counter: 'tasks' })).toBe(12);
    expect(collected.accepted).toBeGreaterThan(0);
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'collect', counter: 'trajectories' })).toBe(
      collected.accepted,
    );
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'collect', counter: 'rejected' }) ?? 0).toBe(
      collected.rejected,
    );

    // Depths match what BullMQ reports.
    const counts = await kit.context
      .queue('fanout-demo')
      .getJobCounts('completed', 'failed', 'delayed', 'waiting', 'active');
    expect(sample(samples, 'hat_queue_jobs', { queue: 'fanout-demo', state: 'delayed' })).toBe(1);
    expect(sample(samples, 'hat_queue_jobs', { queue: 'fanout-demo', state: 'completed' })).toBe(counts.completed);
    expect(sample(samples, 'hat_queue_jobs', { queue: 'fanout-demo', state: 'failed' })).toBe(counts.failed);
    expect(sample(samples, 'hat_queue_jobs', { queue: 'fanout-demo', state: 'waiting' })).toBe(0);
    expect(sample(samples, 'hat_queue_jobs', { queue: 'runs', state: 'failed' })).toBe(1);

    // The depth is read again on the next scrape (cache 0 ms here).
    await kit.context.queue('fanout-demo').remove('parked');
    expect(
      sample((await scrape(server.url)).samples, 'hat_queue_jobs', { queue: 'fanout-demo', state: 'delayed' }),
    ).toBe(0);
    expect((await fetch(server.url.replace('/metrics', '/other'))).status).toBe(404);
  });
});

describe('hat worker --metrics-port (spawned CLI)', () => {
  let kit: QueueTestKit;
  let worker: HatProcess | undefined;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    if (worker && worker.child.exitCode === null) worker.child.kill('SIGKILL');
    await worker?.exited;
    worker = undefined;
    await kit.cleanup();
  });

  it('serves /metrics while the worker runs and stops with it on SIGTERM', async () => {
    const port = await freePort();
    worker = startHat(['worker', '--stages', 'fanout-demo,runs', '--metrics-port', String(port)], {
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
      HAT_LOG_LEVEL: 'info',
    });
    await waitFor(async () => worker!.stderr().includes('worker ready'), 20_000, 50);
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'cli', stages: { 'fanout-demo': { parts: 2, recordsPerPart: 5 } } },
        { env: kit.env, now: new Date() },
      ),
    );
    expect((await watchRun(kit.context, 'cli', { intervalMs: 100 })).state).toBe('completed');

    const url = `http://127.0.0.1:${port}/metrics`;
    const samples = await waitFor(async () => {
      const scraped = await scrape(url);
      return sample(scraped.samples, 'hat_jobs_completed_total', { queue: 'runs', job: 'run' }) === 1
        ? scraped.samples
        : undefined;
    });
    expect(sample(samples, 'hat_stage_counter_total', { stage: 'fanout-demo', counter: 'records' })).toBe(10);
    expect(sample(samples, 'hat_jobs_completed_total', { queue: 'fanout-demo', job: 'part' })).toBe(2);
    expect(sample(samples, 'hat_queue_jobs', { queue: 'runs', state: 'completed' })).toBe(1);
    // Process metrics come with the CLI's server.
    expect(samples.some((entry) => entry.name === 'process_resident_memory_bytes')).toBe(true);
    // Without --metrics-host the server listens on loopback only: another interface's address is refused.
    const outside = Object.values(networkInterfaces())
      .flat()
      .find((entry) => entry && entry.family === 'IPv4' && !entry.internal);
    if (outside) await expect(fetch(`http://${outside.address}:${port}/metrics`)).rejects.toThrow();
    // Every machine has this one: 127.0.0.2 reaches a server bound to 0.0.0.0, not one bound to 127.0.0.1.
    await expect(fetch(`http://127.0.0.2:${port}/metrics`)).rejects.toThrow();

    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
    await expect(fetch(url)).rejects.toThrow();
  });

  it('rejects a bad --metrics-port as bad usage (exit 2)', async () => {
    worker = startHat(['worker', '--metrics-port', '70000'], { HAT_REDIS_PREFIX: kit.prefix });
    const exit = await worker.exited;
    expect(exit.code).toBe(2);
    expect(exit.stderr).toContain('--metrics-port');
  });
});
