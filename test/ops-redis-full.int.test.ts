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

/** Issue #37: a Redis out of memory is named as such, with the refused command and what to do. */
describe('Redis full (maxmemory reached)', () => {
  let directory: string;
  let port: number;
  let server: ChildProcess;
  let redis: Redis;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-redis-full-'));
    port = await freePort();
    server = await startPrivateRedis(port, directory);
    redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
    await redis.set('filler', 'x'.repeat(10_000));
    await redis.config('SET', 'maxmemory-policy', 'noeviction');
    await redis.config('SET', 'maxmemory', '1');
  });
  afterAll(async () => {
    redis.disconnect();
    await shutdownPrivateRedis(port, server);
    await rm(directory, { recursive: true, force: true });
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
    const config = join(directory, 'run.yaml');
    await writeFile(config, 'runId: full\nstages:\n  fanout-demo: { parts: 2 }\n');
    const result = await runHatInProcess(
      {
        ...process.env,
        REDIS_URL: `redis://127.0.0.1:${port}`,
        HAT_REDIS_PREFIX: 'full',
        HAT_ARTIFACTS: pathToFileURL(join(directory, 'artifacts')).href,
        HAT_LOG_LEVEL: 'silent',
      },
      'run',
      config,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^hat: \[REDIS_FULL\] Redis is out of memory and refused EVAL/m);
    expect(result.stderr).toContain("OOM command not allowed when used memory > 'maxmemory'");
    expect(result.stderr).toContain('raise maxmemory or free keys');
  });

  it('names a refused command and an aborted transaction; a worker records [REDIS_FULL] as retryable', async () => {
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
});
