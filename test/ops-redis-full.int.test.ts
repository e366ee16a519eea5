import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { redisFullError } from '../queues/bullmq/redis-full';
import { toWorkerError } from '../queues/bullmq/stage-job-processor';
import { freePort } from './support/free-port';
import { runHatInProcess } from './support/hat-in-process';
import { shutdownPrivateRedis, startPrivateRedis } from './support/private-redis';
import { loggerInto } from './support/captured-logger';
import { waitFor } from './support/queue-test-kit';
import { getRunStatus } from '../queues/runs/run-control';
import { loadEnv } from '../shared/config/env';
import { startWorkerPool } from '../workers/worker-pool';
import { registerCatalogStages } from '../workers/stage-catalog';

/** Issue #37: a Redis out of memory is named as such, with the refused command and what to do, and work resumes once memory is raised. */
describe('Redis full (maxmemory reached)', () => {
  let directory: string;
  let port: number;
  let server: ChildProcess;
  let redis: Redis;
  beforeAll(async () => {
    registerCatalogStages();
    directory = await mkdtemp(join(tmpdir(), 'hat-redis-full-'));
    port = await freePort();
    server = await startPrivateRedis(port, directory);
    redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
    await redis.set('filler', 'x'.repeat(10_000));
    await redis.config('SET', 'maxmemory-policy', 'noeviction');
  });
  afterEach(async () => {
    await redis.config('SET', 'maxmemory', '0');
  });
  afterAll(async () => {
    redis.disconnect();
    await shutdownPrivateRedis(port, server);
    await rm(directory, { recursive: true, force: true });
  });

  /** Redis refuses every write from here on (used memory is over 1 byte), until afterEach lifts the limit. */
  const fill = () => redis.config('SET', 'maxmemory', '1');
  const environment = (prefix: string) => ({
    ...process.env,
    REDIS_URL: `redis://127.0.0.1:${port}`,
    HAT_REDIS_PREFIX: prefix,
    HAT_ARTIFACTS: pathToFileURL(join(directory, 'artifacts')).href,
    HAT_LOG_LEVEL: 'silent',
  });

  const refusal = async (action: () => Promise<unknown>) => {
    try {
      await action();
    } catch (error) {
      return error;
    }
    throw new Error('expected Redis to refuse the write');
  };

  it('hat run on a full Redis fails with [REDIS_FULL], the refused command and what to do', async () => {
    await fill();
    const config = join(directory, 'run.yaml');
    await writeFile(config, 'runId: full\nstages:\n  fanout-demo: { parts: 2 }\n');
    const result = await runHatInProcess(environment('full'), 'run', config);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^hat: \[REDIS_FULL\] Redis is out of memory and refused EVAL/m);
    expect(result.stderr).toContain("OOM command not allowed when used memory > 'maxmemory'");
    expect(result.stderr).toContain('raise maxmemory or free keys');
    // The commands to run, the pipeline's own included.
    expect(result.stderr).toContain('redis-cli CONFIG SET maxmemory <bytes>');
    expect(result.stderr).toContain('hat runs list');
  });

  it('names a refused command and an aborted transaction; a worker records [REDIS_FULL] as retryable', async () => {
    await fill();
    const single = await refusal(() => redis.set('more', 'y'));
    expect(redisFullError(single)?.message).toMatch(/^\[REDIS_FULL\] Redis is out of memory and refused SET: "OOM/);
    const transaction = await refusal(() => redis.multi().set('a', '1').incr('b').exec());
    expect((transaction as Error).message).toMatch(/^EXECABORT/);
    expect(redisFullError(transaction)?.message).toMatch(
      /refused SET, INCR \(the whole transaction was discarded\): "OOM command not allowed/,
    );
    const stored = toWorkerError(single) as Error & { retryable?: boolean };
    expect(stored.message).toMatch(/^\[REDIS_FULL\]/);
    expect(stored.retryable).toBe(true);
    expect(redisFullError(new Error('ERR wrong number of arguments'))).toBeUndefined();
  });

  it('workers log [REDIS_FULL] with what to do while Redis refuses writes, and finish the run once maxmemory is raised', async () => {
    const config = join(directory, 'fills.yaml');
    await writeFile(config, 'runId: fills\nstages:\n  fanout-demo: { parts: 2 }\n');
    expect((await runHatInProcess(environment('fills'), 'run', config)).code).toBe(0);
    await fill();
    const lines: string[] = [];
    const pool = await startWorkerPool({
      env: loadEnv(environment('fills')),
      logger: loggerInto((text) => lines.push(text), 'info'),
      sandbox: 'off',
      queues: ['runs', 'fanout-demo'],
    });
    try {
      await waitFor(async () => lines.some((line) => line.includes('[REDIS_FULL]')), 60_000);
      const refusals = lines
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .filter((line) => line.level >= 50);
      // Every error line says what it is and what to do; none is a bare "worker error".
      expect(refusals.length).toBeGreaterThan(0);
      for (const line of refusals) {
        expect(line.msg).toMatch(/^\[REDIS_FULL\] Redis is out of memory and refused /);
        expect(line.msg).toContain('raise maxmemory or free keys');
      }
      await redis.config('SET', 'maxmemory', '0');
      const context = pool.context;
      const status = await waitFor(async () => {
        const current = await getRunStatus(context, 'fills');
        return current.state === 'completed' || current.state === 'failed' ? current : undefined;
      }, 120_000);
      expect(status.state).toBe('completed');
    } finally {
      await redis.config('SET', 'maxmemory', '0');
      await pool.close(5_000);
    }
  });
});
