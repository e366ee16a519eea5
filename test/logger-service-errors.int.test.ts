import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import Redis from 'ioredis';
import { captureLogger as capture, caught } from '../shared/log/testing/log-capture';
import { useLocalS3Server } from './support/s3-server';

/**
 * The logger against the errors real services raise: ioredis errors carry their command with its
 * Buffer arguments (pino's redaction threw on them), AWS SDK errors carry the HTTP response and
 * its metadata. Each is logged as a line that says what failed, and logging never throws.
 */

describe('logger with ioredis errors from the real Redis', () => {
  let redis: Redis;
  const key = `test-logger-${process.pid}-${Date.now()}`;
  beforeEach(() => {
    redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true, maxRetriesPerRequest: 0 });
  });
  afterEach(async () => {
    if (redis.status === 'ready') await redis.del(key);
    redis.disconnect();
  });

  it('logs a reply error whose command carries a Buffer (pino redaction threw on it)', async () => {
    await redis.set(key, 'a string');
    const error = await caught(() => redis.lpush(key, Buffer.from('binary value')));
    const { logger, parsed } = capture();
    logger.error({ err: error, password: 'hunter2' }, 'redis write failed');
    logger.warn(error as Error);
    const [line, bare] = parsed();
    expect(line.msg).toBe('redis write failed');
    expect(line.password).toBe('[redacted]');
    const err = line.err as { message: string; command: { name: string; args: unknown[] } };
    expect(err.message).toMatch(/WRONGTYPE/);
    expect(err.command.name).toBe('lpush');
    expect(err.command.args).toEqual([key, '[Buffer 12 bytes]']);
    expect(bare.msg).toMatch(/WRONGTYPE/);
  });

  it('logs the reply error of an unknown command with Buffer arguments', async () => {
    const error = await caught(() => redis.call('HAT-NO-SUCH-COMMAND', Buffer.from([0, 1, 2]), 'text'));
    const { logger, parsed } = capture();
    expect(() => logger.error({ err: error }, 'redis command refused')).not.toThrow();
    const err = parsed()[0].err as { type: string; message: string; command: { name: string; args: unknown[] } };
    expect(err.message).toMatch(/unknown command/);
    expect(err.command).toEqual({ name: 'HAT-NO-SUCH-COMMAND', args: ['[Buffer 3 bytes]', 'text'] });
  });

  it('logs the error of a command sent on a closed connection, with the connection options beside it', async () => {
    await redis.connect();
    await redis.quit();
    const error = await caught(() => redis.get(key));
    const { logger, parsed } = capture();
    expect(() => logger.error({ err: error, connection: redis.options, client: redis }, 'redis gone')).not.toThrow();
    const [line] = parsed();
    expect((line.err as { message: string }).message).toBe('Connection is closed.');
    expect(line.connection).toMatchObject({ host: '127.0.0.1', port: 6379 });
  });
});

describe('logger with AWS SDK errors from the local S3-compatible server', () => {
  const s3 = useLocalS3Server();
  const client = () =>
    new S3Client({
      endpoint: s3.server.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: s3.server.accessKeyId, secretAccessKey: s3.server.secretAccessKey },
    });

  it.each([
    ['a missing key', () => ({ Bucket: s3.server.bucket, Key: 'no/such/object.json' }), 'NoSuchKey', 404],
    ['a missing bucket', () => ({ Bucket: 'hat-no-such-bucket', Key: 'object.json' }), 'NoSuchBucket', 404],
  ])('logs GetObject on %s with its code and status, and never the secret key', async (_what, input, type, status) => {
    const s3Client = client();
    try {
      const error = await caught(() => s3Client.send(new GetObjectCommand(input())));
      const { logger, lines, parsed } = capture();
      expect(() => {
        logger.error({ err: error, client: s3Client.config }, 'storage read failed');
        logger.error(error as Error);
        // The raw HTTP response (a stream with its socket) is written too, bounded.
        logger.warn({ response: (error as { $response?: unknown }).$response }, 'storage response');
      }).not.toThrow();
      const [line, bare, response] = parsed();
      expect(line.err).toMatchObject({ type, $metadata: { httpStatusCode: status } });
      expect(bare.msg).toBe((error as Error).message);
      expect(response.response).toMatchObject({ statusCode: status });
      for (const text of lines) expect(text.length).toBeLessThan(100_000);
      expect(lines.join('')).not.toContain(s3.server.secretAccessKey);
    } finally {
      s3Client.destroy();
    }
  });
});
