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

describe('logger arguments that break formatting (issue #37)', () => {
  const throwingGetter = (object: object, key: string) =>
    Object.defineProperty(object, key, {
      enumerable: true,
      get() {
        throw new Error(`${key} getter failed`);
      },
    });
  const hostileProxy = () =>
    new Proxy(
      {},
      {
        get: () => {
          throw new Error('get trap');
        },
        has: () => {
          throw new Error('has trap');
        },
        ownKeys: () => {
          throw new Error('ownKeys trap');
        },
        getPrototypeOf: () => {
          throw new Error('getPrototypeOf trap');
        },
      },
    );

  it('writes a line when a format argument cannot be turned into text', () => {
    const { logger, parsed } = capture();
    const unprintable = {
      toString() {
        throw new Error('toString failed');
      },
    };
    expect(() => logger.info('value %s, count %s', unprintable, Symbol('s'))).not.toThrow();
    expect(() => logger.warn({ stage: 'collect' }, 'at %s', unprintable)).not.toThrow();
    const [first, second] = parsed();
    expect(first.msg).toContain('value');
    expect(second).toMatchObject({ level: 40, stage: 'collect' });
    expect(second.msg).toContain('at');
  });

  it('writes a line for a first argument that throws on every access (a Proxy), and for an error whose message getter throws', () => {
    const { logger, parsed } = capture();
    expect(() => logger.info(hostileProxy(), 'proxy as fields')).not.toThrow();
    const error = throwingGetter(new Error('hidden'), 'message') as Error;
    expect(() => logger.error(error)).not.toThrow();
    const [proxyLine, errorLine] = parsed();
    expect(proxyLine.msg).toBe('proxy as fields');
    expect(errorLine.level).toBe(50);
    expect(JSON.stringify(errorLine)).toContain('message getter failed');
  });

  it('keeps the readable fields beside one that cannot be read', () => {
    const { logger, parsed } = capture();
    const error = new Error('hidden');
    // V8 formats a stack when it is first read, from the message: read it before the message breaks.
    expect(error.stack).toContain('logger.test.ts');
    throwingGetter(error, 'message');
    logger.error({ proxy: hostileProxy(), err: error, runId: 'r1' }, 'stage failed');
    const [line] = parsed();
    expect(line.runId).toBe('r1');
    expect(line.msg).toBe('stage failed');
    expect(String(line.proxy)).toMatch(/^\[unreadable: /);
    expect(line.err).toMatchObject({ type: 'Error' });
    expect((line.err as { stack: string }).stack).toContain('logger.test.ts');
  });

  it('writes valid JSON whatever the first argument is', () => {
    const { logger, lines } = capture();
    logger.info(Symbol('alone'));
    logger.info(12n);
    logger.info(null);
    logger.info(undefined);
    logger.info(true);
    expect(lines).toHaveLength(5);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
    expect((JSON.parse(lines[0]) as { msg: string }).msg).toBe('Symbol(alone)');
    expect((JSON.parse(lines[1]) as { msg: string }).msg).toBe('12');
  });

  it('writes BigInt values in fields, bindings and format arguments', () => {
    const { logger, parsed } = capture();
    logger.child({ offset: 2n ** 70n }).info({ bytes: 5n, nested: [1n] }, 'read %j', { at: 3n });
    const [line] = parsed();
    expect(line).toMatchObject({ offset: '1180591620717411303424', bytes: '5', nested: ['1'] });
    expect(line.msg).toContain('read');
  });

  it('bounds a huge string and an object with very many keys, saying what it left out', () => {
    const { logger, lines, parsed } = capture();
    const wide: Record<string, number> = {};
    for (let index = 0; index < 10_000; index += 1) wide[`k${index}`] = index;
    logger.info({ body: 'x'.repeat(5_000_000), wide }, 'y'.repeat(5_000_000));
    expect(lines[0].length).toBeLessThan(200_000);
    const [line] = parsed();
    expect(line.body).toMatch(/^x+… \[\d+ more characters\]$/);
    expect(line.msg).toMatch(/^y+… \[\d+ more characters\]$/);
    expect(Object.keys(line.wide as object).length).toBeLessThan(1_000);
    expect(JSON.stringify(line.wide)).toMatch(/\d+ more keys/);
  });

  it("copies a child logger's bindings as it copies fields: secrets censored, Buffers summarised, for grandchildren too", () => {
    const { logger, parsed } = capture();
    const child = logger.child({ apiKey: 'sk-child', payload: Buffer.from('abc'), runId: 'r1' });
    child.info('from the child');
    child.child({ token: 't-grandchild', part: 3 }).info('from the grandchild');
    const [line, grandchild] = parsed();
    expect(line).toMatchObject({ apiKey: '[redacted]', payload: '[Buffer 3 bytes]', runId: 'r1' });
    expect(grandchild).toMatchObject({ apiKey: '[redacted]', token: '[redacted]', part: 3 });
  });

  it('logs a URL object as its address, redacted', () => {
    const { logger, parsed } = capture();
    logger.info({ url: new URL('http://user:pw@10.0.0.5:8000/v1?api_key=sk-9') }, 'calling');
    expect(parsed()[0].url).toBe('http://[redacted]@10.0.0.5:8000/v1?api_key=[redacted]');
  });
});
