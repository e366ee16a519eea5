import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toWorkerError } from '../queues/bullmq/stage-job-processor';
import { HatError } from '../shared/errors';
import { Worker } from 'bullmq';
import Redis from 'ioredis';
import { startDashboard } from '../cli/commands/dashboard';
import { runHatInProcess } from './support/hat-in-process';
import { runHat } from './support/hat-process';
import { loggerInto } from './support/captured-logger';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

const secret = 'sk-live-0123456789abcdef';

/** Issue #20: a key inside a URL is refused at the edge and never reaches a log line or Redis. */
describe('credentials in URLs', () => {
  let kit: QueueTestKit;
  let directory: string;
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-url-credentials-'));
  });
  afterEach(async () => {
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const environment = (): NodeJS.ProcessEnv => ({
    ...process.env,
    HAT_REDIS_PREFIX: kit.prefix,
    HAT_ARTIFACTS: kit.artifactsRoot,
    HAT_LOG_LEVEL: 'silent',
  });
  const teacherYaml = [
    'stages:',
    '  collect:',
    '    generate: { count: 2, seed: 1 }',
    '    teacher:',
    '      adapter: openai',
    `      baseUrl: http://user:${secret}@127.0.0.1:9/v1`,
    '      model: teacher',
    '',
  ].join('\n');

  it('hat run refuses a config whose URL carries credentials (exit 2, field and line named, key not echoed) and enqueues nothing', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, teacherYaml);
    const result = await runHatInProcess(environment(), 'run', file);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('[BAD_RUN_CONFIG]');
    expect(result.stderr).toContain(
      `${file}: line 6: stages.collect.teacher.baseUrl: holds credentials in the URL (userinfo (user:password@))`,
    );
    expect(result.stderr).toContain('keys belong in the environment');
    // One problem: the endpoint is not asked for its models with the key in its URL.
    expect(result.stderr).toContain('(1 problem)');
    expect(result.stderr).not.toContain(secret);
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it('hat stage refuses the same stage config (exit 2) and writes nothing', async () => {
    const file = join(directory, 'collect.yaml');
    await writeFile(
      file,
      teacherYaml
        .split('\n')
        .slice(2)
        .map((line) => line.slice(4))
        .join('\n'),
    );
    const out = join(directory, 'out');
    const result = await runHatInProcess(environment(), 'stage', 'collect', '--config', file, '--out', `file://${out}`);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('teacher.baseUrl: holds credentials in the URL');
    expect(result.stderr).not.toContain(secret);
  });

  it('hat run refuses a model baseUrl with a secret query parameter (exit 2, parameter named, value not echoed)', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, teacherYaml.replace(`user:${secret}@127.0.0.1:9/v1`, `127.0.0.1:9/v1?api_key=${secret}`));
    const result = await runHatInProcess(environment(), 'run', file);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'stages.collect.teacher.baseUrl: holds credentials in the URL (the query parameter "api_key")',
    );
    expect(result.stderr).not.toContain(secret);
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it('hat run refuses --artifacts, HAT_ARTIFACTS and S3_ENDPOINT with credentials (exit 2, setting named, key not echoed, nothing in Redis)', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, 'stages:\n  collect:\n    generate: { count: 2, seed: 1 }\n');
    const byOption = await runHatInProcess(environment(), 'run', file, '--artifacts', `s3://AKIA:${secret}@bucket/p`);
    expect(byOption.code).toBe(2);
    expect(byOption.stderr).toContain(
      '[URI_CREDENTIALS] --artifacts "s3://[redacted]@bucket/p" holds credentials in the URL (userinfo (user:password@))',
    );
    expect(byOption.stderr).toContain('keys belong in the environment');
    expect(byOption.stderr).not.toContain(secret);

    const signed = `s3://bucket/p?X-Amz-Credential=AKIA&X-Amz-Signature=${secret}`;
    const byVariable = await runHatInProcess({ ...environment(), HAT_ARTIFACTS: signed }, 'run', file);
    expect(byVariable.code).toBe(2);
    expect(byVariable.stderr).toContain('HAT_ARTIFACTS: holds credentials in the URL');
    expect(byVariable.stderr).not.toContain(secret);
    expect(await kit.context.runsQueue.count()).toBe(0);

    const endpoint = await runHatInProcess(
      { ...environment(), S3_ENDPOINT: `http://AKIA:${secret}@127.0.0.1:9000` },
      'run',
      file,
    );
    expect(endpoint.code).toBe(2);
    expect(endpoint.stderr).toContain('S3_ENDPOINT: holds credentials in the URL');
    expect(endpoint.stderr).not.toContain(secret);
  });

  it.each([
    ['an S3 URI with userinfo', `s3://AKIA:${secret}@bucket/out`, 'userinfo (user:password@)'],
    ['a file URI with userinfo', `file://me:${secret}@host/tmp/out`, 'userinfo (user:password@)'],
    ['a presigned S3 URI', `s3://bucket/out?X-Amz-Signature=${secret}`, 'the query parameter "X-Amz-Signature"'],
  ])('hat stage --out refuses %s (exit 2) without echoing the key', async (_name, out, found) => {
    const file = join(directory, 'collect.yaml');
    await writeFile(file, 'generate: { count: 2, seed: 1 }\n');
    const result = await runHatInProcess(environment(), 'stage', 'collect', '--config', file, '--out', out);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`[URI_CREDENTIALS] --out "`);
    expect(result.stderr).toContain(`holds credentials in the URL (${found})`);
    expect(result.stderr).not.toContain(secret);
  });

  it('redacts userinfo from log lines and from the failure text stored as a job failedReason', () => {
    let logged = '';
    const logger = loggerInto((text) => (logged += text));
    logger.warn(
      { err: new Error(`request to http://u:${secret}@host/v1 failed`), target: `https://${secret}@h/v1` },
      `retrying http://u:${secret}@host/v1`,
    );
    logger.flush();
    expect(logged).toContain('http://[redacted]@host/v1');
    expect(logged).not.toContain(secret);

    const stored = toWorkerError(
      new HatError('MODEL_UNAVAILABLE', `server http://u:${secret}@host/v1 answered 503`, { retryable: true }),
    ) as Error;
    expect(stored.message).toBe('[MODEL_UNAVAILABLE] server http://[redacted]@host/v1 answered 503');
    expect(stored.stack).not.toContain(secret);
  });

  /** An AWS secret access key holds "/" and "+": the userinfo then runs past the first "/". */
  const awsKeyId = 'AKIAIOSFODNN7EXAMPLE';
  const awsSecret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
  const noKeyIn = (text: string) => {
    for (const part of [awsKeyId, 'wJalrXUtnFEMI', 'bPxRfiCYEXAMPLEKEY', secret]) expect(text).not.toContain(part);
  };
  /** The spawned CLI, logging everything it logs (in-process runs log to this process's stderr). */
  const spawnedEnvironment = (): Record<string, string> => ({
    HAT_REDIS_PREFIX: kit.prefix,
    HAT_ARTIFACTS: kit.artifactsRoot,
    HAT_LOG_LEVEL: 'debug',
  });

  it.each([
    ['--out', ['--out', `s3://${awsKeyId}:${awsSecret}@bucket/x`]],
    ['--out', ['--out', `file:/tmp/hat-never/out?token=${secret}`]],
    ['--in', ['--in', `s3://${awsKeyId}:${awsSecret}@bucket/in/manifest.json`, '--out', 'file:///tmp/hat-never']],
  ])(
    'hat stage refuses %s with a key (an AWS secret key with "/" included): exit 2, no key in any line',
    async (option, args) => {
      const file = join(directory, 'collect.yaml');
      await writeFile(file, 'generate: { count: 2, seed: 1 }\n');
      const result = await runHat(['stage', 'collect', '--config', file, ...args], spawnedEnvironment());
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`[URI_CREDENTIALS] ${option} "`);
      expect(result.stderr).toContain('keys belong in the environment');
      expect(result.stderr).not.toContain('invalid bucket name');
      noKeyIn(result.stderr + result.stdout);
    },
  );

  it.each([
    ['userinfo', `s3://k:${secret}@bucket/p`],
    ['an AWS secret key with "/"', `s3://${awsKeyId}:${awsSecret}@bucket/p`],
  ])(
    'HAT_ARTIFACTS with %s is refused by every command that reads the environment (exit 2, key not echoed)',
    async (_name, root) => {
      const file = join(directory, 'collect.yaml');
      await writeFile(file, 'generate: { count: 2, seed: 1 }\n');
      for (const args of [
        ['runs', 'list'],
        ['stage', 'collect', '--config', file, '--out', `file://${directory}/out`],
      ]) {
        const result = await runHat(args, { ...spawnedEnvironment(), HAT_ARTIFACTS: root });
        expect([args[0], result.code]).toEqual([args[0], 2]);
        expect(result.stderr).toContain('HAT_ARTIFACTS: holds credentials in the URL');
        noKeyIn(result.stderr + result.stdout);
      }
    },
  );

  it('a baseUrl with ?api_key= is refused at validation and never logged, even at debug level', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, teacherYaml.replace(`user:${secret}@127.0.0.1:9/v1`, `127.0.0.1:9/v1?api_key=${secret}`));
    const result = await runHat(['run', file], spawnedEnvironment());
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('baseUrl: holds credentials in the URL (the query parameter "api_key")');
    noKeyIn(result.stderr + result.stdout);
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it('hat checkpoint promote and register refuse an endpoint with a key (exit 2) and write no pointer', async () => {
    const promote = await runHatInProcess(
      environment(),
      'checkpoint',
      'promote',
      '--endpoint',
      `http://127.0.0.1:9/v1?api_key=${secret}`,
      '--model',
      'm',
    );
    expect(promote.code).toBe(2);
    expect(promote.stderr).toContain(
      '[URI_CREDENTIALS] --endpoint "http://127.0.0.1:9/v1?api_key=[redacted]" holds credentials in the URL',
    );
    noKeyIn(promote.stderr + promote.stdout);
    expect(await kit.store.head('checkpoints/promoted.json')).toBeUndefined();

    const register = await runHatInProcess(
      environment(),
      'checkpoint',
      'register',
      'some-run',
      '--endpoint',
      `http://u:${secret}@127.0.0.1:9/v1`,
      '--model',
      'm',
    );
    expect(register.code).toBe(2);
    expect(register.stderr).toContain('[URI_CREDENTIALS] --endpoint "http://[redacted]@127.0.0.1:9/v1"');
    noKeyIn(register.stderr + register.stdout);
  });

  it('hat checkpoint list shows a pointer written before keys were refused without its key', async () => {
    const record = {
      schemaVersion: 1,
      endpoint: `http://u:${secret}@10.0.0.5:8000/v1?api_key=${secret}`,
      model: 'm',
      promotedBy: 'cli',
      promotedAt: '2026-01-01T00:00:00.000Z',
      reasons: ['promoted by hand'],
    };
    await kit.store.put('checkpoints/promoted.json', JSON.stringify(record));
    const text = await runHatInProcess(environment(), 'checkpoint', 'list');
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('promoted: m at http://[redacted]@10.0.0.5:8000/v1?api_key=[redacted]');
    noKeyIn(text.stdout);
    const json = await runHatInProcess(environment(), 'checkpoint', 'list', '--json');
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as { promoted: { endpoint: string } }).promoted.endpoint).toBe(
      'http://[redacted]@10.0.0.5:8000/v1?api_key=[redacted]',
    );
  });

  it('the dashboard shows a job written before keys were refused without its key (data, failure reason)', async () => {
    const queue = kit.context.queue('fanout-demo');
    // A failure text stored raw, as BullMQ stores any processor's error.
    await queue.add('part', { n: 1 }, { jobId: 'old-failure', attempts: 1 });
    const connection = new Redis(kit.env.REDIS_URL, { maxRetriesPerRequest: null });
    const failing = new Worker(
      queue.name,
      () => Promise.reject(new Error(`cannot reach http://u:${secret}@10.0.0.5/v1`)),
      { connection, prefix: kit.prefix },
    );
    await new Promise<void>((resolve) => failing.on('failed', () => resolve()));
    await failing.close();
    connection.disconnect();
    await queue.add(
      'part',
      { artifactsRoot: `s3://${awsKeyId}:${awsSecret}@bucket/p`, note: `see http://h/v1?token=${secret}` },
      { jobId: 'old-job' },
    );
    const token = 'url-credentials-dashboard-token-0123456789';
    const dashboard = await startDashboard({ env: kit.env, port: 0, host: '127.0.0.1', token });
    try {
      const headers = { authorization: `Bearer ${token}` };
      const listing = await fetch(`${dashboard.url}api/queues?activeQueue=fanout-demo&status=waiting&page=1`, {
        headers,
      });
      expect(listing.status).toBe(200);
      const body = (await listing.json()) as { queues: { name: string; jobs: { id: string; data: unknown }[] }[] };
      const job = body.queues
        .find((entry) => entry.name === 'fanout-demo')
        ?.jobs.find((entry) => entry.id === 'old-job');
      expect(job?.data).toEqual({
        artifactsRoot: 's3://[redacted]@bucket/p',
        note: 'see http://h/v1?token=[redacted]',
      });
      const failed = await fetch(`${dashboard.url}api/queues/fanout-demo/old-failure`, { headers });
      const failure = (await failed.json()) as { job: { failedReason: string; stacktrace: string[] } };
      expect(failure.job.failedReason).toBe('cannot reach http://[redacted]@10.0.0.5/v1');
      noKeyIn(JSON.stringify(failure));
      const single = await fetch(`${dashboard.url}api/queues/fanout-demo/old-job`, { headers });
      expect(single.status).toBe(200);
      const singleText = await single.text();
      expect(singleText).toContain('s3://[redacted]@bucket/p');
      noKeyIn(singleText);
    } finally {
      await dashboard.close();
    }
  });
});
