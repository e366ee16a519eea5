import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HatError } from '../errors';

/**
 * A local S3-compatible server (s3rver) for tests, benchmarks and `hat demo`.
 *
 * Why a child process: s3rver 3.7.1 encrypts ListObjectsV2 continuation tokens with DES-CBC
 * (`crypto.createCipheriv('des', ...)`, chosen for its 8-byte block). OpenSSL 3, which Node 17+
 * links, moved DES to its "legacy" provider, so every listing of more than 1000 keys answers
 * HTTP 500 ("digital envelope routines::unsupported"). The provider can only be enabled when a
 * process starts (`--openssl-legacy-provider`), so the server runs in its own Node process
 * started with that flag. That also keeps its request handling off the caller's event loop.
 */
export interface LocalS3Server {
  /** `http://127.0.0.1:<port>`: pass as S3_ENDPOINT. */
  endpoint: string;
  /** The bucket created at start. */
  bucket: string;
  /** Where s3rver keeps the objects. */
  directory: string;
  /** Credentials s3rver accepts (its fixed dummy account). */
  accessKeyId: string;
  secretAccessKey: string;
  /** The environment variables that point a store at this server (shared/config/env.ts names). */
  env: { S3_ENDPOINT: string; S3_REGION: string; AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string };
  /** Stops the server and, unless kept, removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface LocalS3ServerOptions {
  /** Bucket to create. Default `hat-artifacts`. */
  bucket?: string;
  /** Data directory. Default: a new temp directory. */
  directory?: string;
  /** Keep the data directory on stop. Default false for a temp directory, always true for a given one. */
  keepDirectory?: boolean;
  /** Port on 127.0.0.1. Default 0: any free port. */
  port?: number;
  /** How long to wait for the server to listen. Default 15 s. */
  startTimeoutMs?: number;
}

/** Runs in the child: starts s3rver with the options the parent sends and reports the port. */
const childProgram = `
process.title = 'hat-local-s3';
const S3rver = require(process.env.HAT_S3RVER_MODULE);
let server;
process.on('message', (message) => {
  if (message.type !== 'start') return;
  server = new S3rver(message.options);
  server.run().then(
    (address) => process.send({ type: 'listening', port: address.port }),
    (error) => process.send({ type: 'failed', message: String(error && error.stack || error) }, () => process.exit(1)),
  );
});
// The parent went away (stop() or a crash): close the server and exit, never linger.
process.on('disconnect', () => {
  const exit = () => process.exit(0);
  if (server) server.close().then(exit, exit); else exit();
});
`;

const s3rverCredential = 'S3RVER';

/** Starts s3rver on a free loopback port with a fresh bucket. */
export async function startLocalS3Server(options: LocalS3ServerOptions = {}): Promise<LocalS3Server> {
  const bucket = options.bucket ?? 'hat-artifacts';
  const ownsDirectory = options.directory === undefined;
  const directory = options.directory ?? (await mkdtemp(join(tmpdir(), 'hat-s3-')));
  const removeOnStop = ownsDirectory && !options.keepDirectory;

  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', childProgram], {
    env: { ...process.env, HAT_S3RVER_MODULE: require.resolve('s3rver'), NODE_OPTIONS: '' },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4000);
  });

  let port: number;
  try {
    port = await waitForListening(child, options.startTimeoutMs ?? 15_000, () => stderr, {
      address: '127.0.0.1',
      port: options.port ?? 0,
      silent: true,
      directory,
      configureBuckets: [{ name: bucket, configs: [] }],
    });
  } catch (error) {
    await stopChild(child);
    if (removeOnStop) await rm(directory, { recursive: true, force: true });
    throw error;
  }

  // The child exits by itself when this process does (its IPC channel closes), so it need not
  // keep this process alive: a forgotten stop() cannot hang a CLI or a test run.
  child.unref();
  child.channel?.unref();
  (child.stderr as (NodeJS.ReadableStream & { unref?: () => void }) | null)?.unref?.();
  const endpoint = `http://127.0.0.1:${port}`;
  let stopping: Promise<void> | undefined;
  return {
    endpoint,
    bucket,
    directory,
    accessKeyId: s3rverCredential,
    secretAccessKey: s3rverCredential,
    env: {
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: s3rverCredential,
      AWS_SECRET_ACCESS_KEY: s3rverCredential,
    },
    stop() {
      stopping ??= (async () => {
        await stopChild(child);
        if (removeOnStop) await rm(directory, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

function waitForListening(
  child: ChildProcess,
  timeoutMs: number,
  stderr: () => string,
  serverOptions: Record<string, unknown>,
): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const fail = (reason: string) => {
      cleanup();
      const output = stderr().trim();
      reject(
        new HatError(
          'LOCAL_S3_START_FAILED',
          `the local S3 server (s3rver) did not start: ${reason}${output ? `\n${output}` : ''}`,
        ),
      );
    };
    const onMessage = (message: { type?: string; port?: number; message?: string }) => {
      if (message.type === 'listening' && typeof message.port === 'number') {
        cleanup();
        resolve(message.port);
      } else if (message.type === 'failed') {
        fail(message.message ?? 'unknown error');
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      fail(`it exited (${signal ?? `code ${code}`})`);
    const onError = (error: Error) => fail(error.message);
    const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs);
    function cleanup() {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      child.off('error', onError);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.once('error', onError);
    child.send({ type: 'start', options: serverOptions });
  });
}

/** Disconnects (the child then closes the server and exits); kills it if it does not exit in time. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (child.connected) child.disconnect();
  else child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
