import { createServer } from 'node:net';
import { S3Client, GetObjectCommand } from '@aws-sdk/client-s3';
import Redis from 'ioredis';
import { fetch as undiciFetch } from 'undici';
import { captureLogger as capture, caught } from './testing/log-capture';

/** A local TCP port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('logger', () => {
  it('logs an ioredis connection error', async () => {
    const port = await closedPort();
    const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null });
    const emitted = new Promise<Error>((resolve) => redis.once('error', resolve));
    await caught(() => redis.connect());
    const error = await emitted;
    redis.disconnect();
    const { logger, parsed } = capture();
    logger.error({ err: error, connection: redis.options }, 'redis unreachable');
    const [line] = parsed();
    expect(line.err).toMatchObject({ code: 'ECONNREFUSED', port });
  });

  it('logs an AWS SDK error from S3 on a closed port, without the secret key', async () => {
    const port = await closedPort();
    const client = new S3Client({
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'very-secret-key' },
    });
    const error = await caught(() => client.send(new GetObjectCommand({ Bucket: 'bucket', Key: 'object' })));
    const { logger, lines, parsed } = capture();
    logger.error({ err: error, client: client.config }, 'storage failed');
    client.destroy();
    expect((parsed()[0].err as { message: string }).message).toMatch(/ECONNREFUSED|connect/);
    expect(lines.join('')).not.toContain('very-secret-key');
  });

  it('logs an undici fetch error and redacts a key in its URL', async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}/v1/chat?api_key=sk-live-456`;
    const error = await caught(() => undiciFetch(url));
    const { logger, lines, parsed } = capture();
    logger.error({ err: error, url }, `request to ${url} failed`);
    const [line] = parsed();
    expect((line.err as { message: string }).message).toMatch(/^fetch failed: connect ECONNREFUSED/);
    expect(line.url).toBe(`http://127.0.0.1:${port}/v1/chat?api_key=[redacted]`);
    expect(line.msg).toBe(`request to http://127.0.0.1:${port}/v1/chat?api_key=[redacted] failed`);
    expect(lines.join('')).not.toContain('sk-live-456');
  });

  it('writes a line for fields holding cycles, typed arrays, getters that throw and deep nesting', () => {
    const { logger, parsed } = capture();
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    const throwing = Object.defineProperty({}, 'broken', {
      enumerable: true,
      get() {
        throw new Error('getter failed');
      },
    });
    let deep: Record<string, unknown> = { apiKey: 'sk-deep' };
    for (let level = 0; level < 20; level += 1) deep = { inner: deep };
    logger.info({
      cycle,
      bytes: new Uint8Array(4),
      throwing,
      deep,
      nested: { a: { b: { c: { d: { token: 't' } } } } },
    });
    const [line] = parsed();
    expect(line.cycle).toEqual({ name: 'loop', self: '[circular]' });
    expect(line.bytes).toBe('[Uint8Array 4 bytes]');
    expect(line.throwing).toEqual({ broken: '[unreadable: getter failed]' });
    expect(JSON.stringify(line.deep)).not.toContain('sk-deep');
    expect(line.nested).toEqual({ a: { b: { c: { d: { token: '[redacted]' } } } } });
  });
});
