import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { waitFor } from './queue-test-kit';

/**
 * A redis-server of a test's own (AOF on, so a restart keeps the queues), for tests that shut
 * Redis down: started on `port` with its files in `dataDirectory`, resolved once it answers PING.
 */
export async function startPrivateRedis(port: number, dataDirectory: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dataDirectory,
      '--appendonly',
      'yes',
      '--save',
      '',
      '--protected-mode',
      'no',
    ],
    {
      stdio: 'ignore',
    },
  );
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await waitFor(
      async () =>
        (await probe.connect().then(
          () => probe.ping(),
          () => undefined,
        )) === 'PONG',
      10_000,
      50,
    );
  } finally {
    probe.disconnect();
  }
  return child;
}

/** SHUTDOWN (Redis writes its AOF and exits), resolved once the process has exited. */
export async function shutdownPrivateRedis(port: number, child: ChildProcess): Promise<void> {
  const admin = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => null });
  admin.on('error', () => undefined);
  const stopped = new Promise((resolve) => child.once('exit', resolve));
  await admin.call('SHUTDOWN').catch(() => undefined);
  admin.disconnect();
  await stopped;
}
