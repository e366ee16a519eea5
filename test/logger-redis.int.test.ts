import Redis from 'ioredis';
import { captureLogger as capture, caught } from '../shared/log/testing/log-capture';

/** The logger against a real Redis: an ioredis reply error carries the command, Buffers included. */

describe('logger', () => {
  it('logs an ioredis reply error whose command carries a Buffer (pino redaction threw on it)', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true, maxRetriesPerRequest: 0 });
    const key = `test-logger-${process.pid}-${Date.now()}`;
    try {
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
    } finally {
      await redis.del(key);
      redis.disconnect();
    }
  });
});
