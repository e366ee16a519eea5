import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { getRunStatus } from '../queues/runs/run-control';
import { openQueueContext, type QueueContext } from '../queues/bullmq/queue-context';
import { loadEnv } from '../shared/config/env';
import { silentLogger } from '../shared/log/logger';
import { startWorkerPool, type WorkerPool } from '../workers/worker-pool';
import { freePort } from './support/free-port';
import { runHatInProcess } from './support/hat-in-process';
import { shutdownPrivateRedis, startPrivateRedis } from './support/private-redis';
import { waitFor } from './support/queue-test-kit';

/** Issue #20: `hat run --wait` rides out a Redis restart, and says what to do when Redis stays away. */
describe('hat run --wait while Redis restarts', () => {
  let directory: string;
  let redis: ChildProcess | undefined;
  let pool: WorkerPool | undefined;
  let observer: QueueContext | undefined;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-watch-redis-'));
  });
  afterEach(async () => {
    await observer?.close();
    await pool?.close(5_000);
    if (redis && redis.exitCode === null && redis.signalCode === null) {
      const exited = new Promise((resolve) => redis?.once('exit', resolve));
      redis.kill('SIGKILL');
      await exited;
    }
    await rm(directory, { recursive: true, force: true });
  });

  const setUp = async (timeoutMs: string) => {
    const port = await freePort();
    const dataDirectory = join(directory, 'redis');
    await mkdir(dataDirectory, { recursive: true });
    redis = await startPrivateRedis(port, dataDirectory);
    const variables = {
      REDIS_URL: `redis://127.0.0.1:${port}`,
      HAT_REDIS_PREFIX: `test-${randomUUID()}`,
      HAT_ARTIFACTS: pathToFileURL(join(directory, 'artifacts')).href,
      HAT_LOG_LEVEL: 'silent',
      HAT_WATCH_REDIS_TIMEOUT_MS: timeoutMs,
    };
    const env = loadEnv(variables);
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      ['runId: watched', 'stages:', '  fanout-demo: { parts: 6, partDelayMs: 700 }', ''].join('\n'),
    );
    observer = await openQueueContext(env, { role: 'worker' });
    return { port, dataDirectory, env, variables, config };
  };

  it('keeps following the run across a two-second restart and exits 0 when the run completes', async () => {
    const { port, dataDirectory, env, variables, config } = await setUp('60000');
    pool = await startWorkerPool({
      env,
      queues: ['fanout-demo', 'runs'],
      concurrency: 1,
      logger: silentLogger(),
      sandbox: 'off',
    });
    await pool.waitUntilReady();
    const watching = runHatInProcess({ ...process.env, ...variables }, 'run', config, '--wait');
    await waitFor(
      async () => {
        const status = await getRunStatus(observer as QueueContext, 'watched').catch(() => undefined);
        return (status?.stages[0]?.partsDone ?? 0) >= 1;
      },
      20_000,
      50,
    );
    await shutdownPrivateRedis(port, redis as ChildProcess);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    redis = await startPrivateRedis(port, dataDirectory);

    const result = await watching;
    expect(result.stderr).toContain('Redis does not answer');
    expect(result.stderr).toContain('Redis answers again');
    expect(result.stderr).not.toMatch(/Stream isn't writeable[^;]*$/m);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/run watched completed/);
  }, 90_000);

  it('stops with [REDIS_UNAVAILABLE] and says how to follow the run when Redis stays away past the bound', async () => {
    const { port, variables, config } = await setUp('1500');
    // No workers: the run waits; the watcher is following it when Redis goes away.
    const watching = runHatInProcess({ ...process.env, ...variables }, 'run', config, '--wait');
    await waitFor(async () => (await observer?.runsQueue.count()) === 1, 10_000, 50);
    await observer?.close();
    observer = undefined;
    await shutdownPrivateRedis(port, redis as ChildProcess);
    const result = await watching;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('[REDIS_UNAVAILABLE]');
    expect(result.stderr).toContain(
      'the run may still be running: follow it with `hat runs show watched` once Redis is back',
    );
  }, 60_000);
});
