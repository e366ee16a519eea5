import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toWorkerError } from '../queues/bullmq/stage-job-processor';
import { HatError } from '../shared/errors';
import { runHatInProcess } from './support/hat-in-process';
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
    expect(result.stderr).toContain(`${file}: line 6: stages.collect.teacher.baseUrl: holds credentials in a URL`);
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
    expect(result.stderr).toContain('teacher.baseUrl: holds credentials in a URL');
    expect(result.stderr).not.toContain(secret);
  });

  it('hat run refuses a model baseUrl with a secret query parameter (exit 2, parameter named, value not echoed)', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, teacherYaml.replace(`user:${secret}@127.0.0.1:9/v1`, `127.0.0.1:9/v1?api_key=${secret}`));
    const result = await runHatInProcess(environment(), 'run', file);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'stages.collect.teacher.baseUrl: holds credentials in a URL (the query parameter "api_key")',
    );
    expect(result.stderr).not.toContain(secret);
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it('hat run refuses --artifacts, HAT_ARTIFACTS and S3_ENDPOINT with credentials (exit 2, setting named, key not echoed, nothing in Redis)', async () => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, 'stages:\n  collect:\n    generate: { count: 2, seed: 1 }\n');
    const byOption = await runHatInProcess(environment(), 'run', file, '--artifacts', `s3://AKIA:${secret}@bucket/p`);
    expect(byOption.code).toBe(2);
    expect(byOption.stderr).toContain('--artifacts: holds credentials in the URI (userinfo (user:password@))');
    expect(byOption.stderr).not.toContain(secret);

    const signed = `s3://bucket/p?X-Amz-Credential=AKIA&X-Amz-Signature=${secret}`;
    const byVariable = await runHatInProcess({ ...environment(), HAT_ARTIFACTS: signed }, 'run', file);
    expect(byVariable.code).toBe(2);
    expect(byVariable.stderr).toContain('HAT_ARTIFACTS: holds credentials in the URI');
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
    expect(result.stderr).toContain(`[URI_CREDENTIALS] artifact URI`);
    expect(result.stderr).toContain(`holds credentials (${found})`);
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
});
