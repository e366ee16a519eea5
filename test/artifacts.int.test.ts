import { createCipheriv, createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { ArtifactStore, ObjectInfo } from '../shared/artifacts/artifact-store';
import { stageManifestKey, stagePartKey } from '../shared/artifacts/artifact-layout';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { startLocalS3Server } from '../shared/artifacts/local-s3-server';
import { manifestObjectOf, readManifest, stageOutputComplete, writeManifest } from '../shared/artifacts/manifest';
import { S3ArtifactStore } from '../shared/artifacts/s3-artifact-store';
import { HatError, TransientError, errorCodeOf } from '../shared/errors';
import { useLocalS3Server } from './support/s3-server';

const s3 = useLocalS3Server();
const temporaryDirectories: string[] = [];

async function freshFileStore(): Promise<FileArtifactStore> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-artifacts-test-'));
  temporaryDirectories.push(directory);
  return new FileArtifactStore(directory);
}

afterAll(async () => {
  await Promise.all(temporaryDirectories.map((directory) => rm(directory, { recursive: true, force: true })));
});

const backends: Array<[string, () => Promise<ArtifactStore>]> = [
  ['file', freshFileStore],
  ['s3', async () => s3.store()],
];

/** Deterministic pseudo-random bytes (AES-CTR keystream), streamed in 1 MiB chunks. */
function pseudoRandomStream(totalBytes: number, seed: string): Readable {
  const cipher = createCipheriv('aes-256-ctr', createHash('sha256').update(seed).digest(), Buffer.alloc(16));
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= totalBytes) return void this.push(null);
      const size = Math.min(1024 * 1024, totalBytes - sent);
      sent += size;
      this.push(cipher.update(Buffer.alloc(size)));
    },
  });
}

/** A source that delivers some bytes, then fails, like a producer crashing mid-write. */
function failingStream(bytesBeforeFailure: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= bytesBeforeFailure) return void this.destroy(new Error('producer crashed midway'));
      const chunk = Buffer.alloc(256 * 1024, sent % 251);
      sent += chunk.length;
      this.push(chunk);
    },
  });
}

/** Names of the S3 commands a store sends from now on. */
function recordCommands(store: S3ArtifactStore): string[] {
  const commands: string[] = [];
  store.client.middlewareStack.add(
    (next, context) => (args) => {
      commands.push(context.commandName ?? '');
      return next(args);
    },
    { step: 'initialize', name: 'recordCommands' },
  );
  return commands;
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

async function sha256OfStream(stream: Readable): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

describe.each(backends)('%s artifact store', (backend, openStore) => {
  let store: ArtifactStore;
  beforeEach(async () => {
    store = await openStore();
  });

  it('round-trips strings, bytes and streams, with size and sha256 of what was stored', async () => {
    const text = await store.put('runs/r1/notes.txt', 'héllo\n', { contentType: 'text/plain' });
    expect(text).toMatchObject({
      key: 'runs/r1/notes.txt',
      uri: store.uriOf('runs/r1/notes.txt'),
      bytes: 7,
      sha256: createHash('sha256').update('héllo\n').digest('hex'),
    });
    await store.put('runs/r1/bytes.bin', new Uint8Array([0, 1, 2, 255]));
    const streamed = await store.put('runs/r1/stream.bin', Readable.from([Buffer.from('ab'), Buffer.from('cd')]));
    expect(streamed.bytes).toBe(4);

    expect((await store.getBuffer('runs/r1/notes.txt')).toString('utf8')).toBe('héllo\n');
    expect([...(await store.getBuffer('runs/r1/bytes.bin'))]).toEqual([0, 1, 2, 255]);
    expect(Buffer.concat(await collect(await store.getStream('runs/r1/stream.bin'))).toString()).toBe('abcd');
    expect(await store.head('runs/r1/bytes.bin')).toMatchObject({ key: 'runs/r1/bytes.bin', bytes: 4 });

    await store.put('runs/r1/notes.txt', 'replaced');
    expect((await store.getBuffer('runs/r1/notes.txt')).toString()).toBe('replaced');
    await store.delete('runs/r1/notes.txt');
    expect(await store.head('runs/r1/notes.txt')).toBeUndefined();
    await store.delete('runs/r1/notes.txt');
  });

  it('maps keys to URIs under its root and back', async () => {
    const uri = store.uriOf('runs/r1/collect/part-0000.jsonl.gz');
    expect(uri.startsWith(`${store.rootUri}/`)).toBe(true);
    expect(uri.startsWith(backend === 's3' ? 's3://' : 'file:///')).toBe(true);
    expect(store.keyOf(uri)).toBe('runs/r1/collect/part-0000.jsonl.gz');
    const outside = backend === 's3' ? `s3://${s3.server.bucket}/elsewhere/x` : 'file:///elsewhere/x';
    expect(() => store.keyOf(outside)).toThrow(/^\[URI_OUTSIDE_STORE\]/);
  });

  it('lists by prefix in key order', async () => {
    const keys = [
      'runs/r1/collect/part-0001.jsonl.gz',
      'runs/r1/collect/part-0000.jsonl.gz',
      'runs/r1/collect/manifest.json',
      'runs/r10/x',
      'runs/r1/z/deep/er',
      'ü/x',
      'z',
      'a',
    ];
    await Promise.all(keys.map((key) => store.put(key, key)));
    const listed = await collect(store.list(''));
    expect(listed.map((info) => info.key)).toEqual([
      'a',
      'runs/r1/collect/manifest.json',
      'runs/r1/collect/part-0000.jsonl.gz',
      'runs/r1/collect/part-0001.jsonl.gz',
      'runs/r1/z/deep/er',
      'runs/r10/x',
      'z',
      'ü/x',
    ]);
    expect(listed.find((info) => info.key === 'runs/r10/x')).toMatchObject({
      bytes: 10,
      uri: store.uriOf('runs/r10/x'),
    });
    expect((await collect(store.list('runs/r1/'))).map((info) => info.key)).toEqual([
      'runs/r1/collect/manifest.json',
      'runs/r1/collect/part-0000.jsonl.gz',
      'runs/r1/collect/part-0001.jsonl.gz',
      'runs/r1/z/deep/er',
    ]);
    expect((await collect(store.list('runs/r1/collect/part-'))).map((info) => info.key)).toEqual([
      'runs/r1/collect/part-0000.jsonl.gz',
      'runs/r1/collect/part-0001.jsonl.gz',
    ]);
    expect((await collect(store.list('runs/r1'))).map((info) => info.key)).toHaveLength(5);
    expect(await collect(store.list('nothing/here/'))).toEqual([]);
  });

  it('streams 20 MB byte-exactly (multipart on S3) and reports the right sha256', async () => {
    const totalBytes = 20 * 1024 * 1024;
    const expected = await sha256OfStream(pseudoRandomStream(totalBytes, 'twenty'));
    const commands = store instanceof S3ArtifactStore ? recordCommands(store) : [];
    const info = await store.put('big/twenty.bin', pseudoRandomStream(totalBytes, 'twenty'));
    expect(info).toMatchObject({ bytes: totalBytes, sha256: expected.sha256 });
    expect((await store.head('big/twenty.bin'))?.bytes).toBe(totalBytes);
    expect(await sha256OfStream(await store.getStream('big/twenty.bin'))).toEqual(expected);
    if (store instanceof S3ArtifactStore) {
      // 20 MiB in 8 MiB parts: a multipart upload of 3 parts.
      expect(commands.filter((name) => name !== 'GetObjectCommand' && name !== 'HeadObjectCommand')).toEqual([
        'CreateMultipartUploadCommand',
        'UploadPartCommand',
        'UploadPartCommand',
        'UploadPartCommand',
        'CompleteMultipartUploadCommand',
      ]);
    }
  });

  it('never shows a partial object: a stream failing midway leaves the key absent, or its old object intact', async () => {
    const failure = await rejectionOf(store.put('runs/r1/partial.bin', failingStream(1024 * 1024)));
    expect(failure.message).toContain('producer crashed midway');
    expect(await store.head('runs/r1/partial.bin')).toBeUndefined();

    await store.put('runs/r1/kept.bin', 'the complete old version');
    await expect(store.put('runs/r1/kept.bin', failingStream(512 * 1024))).rejects.toThrow('producer crashed midway');
    expect((await store.getBuffer('runs/r1/kept.bin')).toString()).toBe('the complete old version');
    expect((await collect(store.list('runs/r1/'))).map((info) => info.key)).toEqual(['runs/r1/kept.bin']);
    if (store instanceof FileArtifactStore) {
      // No temp files are left beside the final names either.
      expect(await readdir(join(store.rootDirectory, 'runs/r1'))).toEqual(['kept.bin']);
    }
  });

  it('rejects bad keys with BAD_OBJECT_KEY on every operation', async () => {
    for (const key of ['../escape', '/absolute', 'a//b', 'a\\b', 'a/\u0007', 'a/./b', '']) {
      expect(errorCodeOf(await rejectionOf(store.put(key, 'x')))).toBe('BAD_OBJECT_KEY');
      expect(errorCodeOf(await rejectionOf(store.getBuffer(key)))).toBe('BAD_OBJECT_KEY');
      expect(errorCodeOf(await rejectionOf(store.head(key)))).toBe('BAD_OBJECT_KEY');
    }
    expect(errorCodeOf(await rejectionOf(collect(store.list('../'))))).toBe('BAD_OBJECT_KEY');
    expect(await collect(store.list(''))).toEqual([]);
  });

  it('reports a missing object as ARTIFACT_NOT_FOUND naming its URI', async () => {
    for (const read of [() => store.getBuffer('runs/none.bin'), () => store.getStream('runs/none.bin')]) {
      const error = await rejectionOf(read());
      expect(errorCodeOf(error)).toBe('ARTIFACT_NOT_FOUND');
      expect(error.message).toContain(`${store.uriOf('runs/none.bin')} does not exist`);
      expect((error as HatError).exitCode).toBe(2);
    }
  });

  it('round-trips gzip JSONL with a schema, and names URI, line and field of a bad record', async () => {
    const schema = z.object({
      id: z.number(),
      messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.string() })),
    });
    const records = Array.from({ length: 3000 }, (_, id) => ({
      id,
      messages: [
        { role: 'user' as const, content: `q${id}` },
        { role: 'assistant' as const, content: `a${id}` },
      ],
    }));
    const key = stagePartKey('run-7', 'collect', 'part-0000', 'jsonl.gz');
    const written = await writeJsonl(store, key, records, { schema });
    expect(written).toMatchObject({ records: 3000, uri: store.uriOf(key) });
    expect(written.sha256).toBe(
      createHash('sha256')
        .update(await store.getBuffer(key))
        .digest('hex'),
    );
    expect(await collect(readJsonl(store, key, { schema }))).toEqual(records);

    const badRecords: unknown[] = [
      ...records.slice(0, 16),
      {
        id: 16,
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a' },
          { role: 'robot', content: 'x' },
        ],
      },
    ];
    await writeJsonl(store, 'loose.jsonl.gz', badRecords);
    const error = await rejectionOf(collect(readJsonl(store, 'loose.jsonl.gz', { schema })));
    expect(errorCodeOf(error)).toBe('BAD_RECORD');
    expect(error.message).toContain(`${store.uriOf('loose.jsonl.gz')}: line 17: messages[2].role: Invalid option`);

    const refused = await rejectionOf(writeJsonl(store, 'strict.jsonl.gz', badRecords as typeof records, { schema }));
    expect(errorCodeOf(refused)).toBe('BAD_RECORD');
    expect(await store.head('strict.jsonl.gz')).toBeUndefined();
  });

  it('writes a manifest last and recognises complete stage output', async () => {
    const manifestKey = stageManifestKey('run-7', 'collect');
    expect(await stageOutputComplete(store, manifestKey)).toBeUndefined();
    const objects = [];
    for (const part of ['part-0000', 'part-0001']) {
      const result = await writeJsonl(store, stagePartKey('run-7', 'collect', part, 'jsonl.gz'), [{ part }]);
      objects.push(manifestObjectOf(result, { schemaVersion: 1, format: 'jsonl.gz' }));
    }
    const clock = () => new Date('2025-06-01T00:00:00Z');
    const { manifest } = await writeManifest(
      store,
      manifestKey,
      {
        stage: 'collect',
        runId: 'run-7',
        objects,
        lineage: { inputs: [], configHash: 'abc', codeVersion: 'test' },
        stats: { trajectories: 2 },
      },
      { clock },
    );
    expect(await readManifest(store, manifestKey)).toEqual(manifest);
    expect(manifest.objects.map((object) => object.uri)).toEqual([
      store.uriOf('runs/run-7/collect/part-0000.jsonl.gz'),
      store.uriOf('runs/run-7/collect/part-0001.jsonl.gz'),
    ]);
    expect(await stageOutputComplete(store, manifestKey)).toEqual(manifest);
    await store.delete('runs/run-7/collect/part-0001.jsonl.gz');
    expect(await stageOutputComplete(store, manifestKey)).toBeUndefined();
  });
});

describe('file artifact store', () => {
  it('lists in S3 byte order across directories ("a-c" and "a.x" before "a/b")', async () => {
    const store = await freshFileStore();
    for (const key of ['a/b', 'a-c', 'a.x', 'a0', 'ab/c/d']) await store.put(key, key);
    expect((await collect(store.list(''))).map((info) => info.key)).toEqual(['a-c', 'a.x', 'a/b', 'a0', 'ab/c/d']);
  });

  it('refuses keys that nest under another key with KEY_CONFLICT (S3 allows them, directories do not)', async () => {
    const store = await freshFileStore();
    await store.put('a', 'a file');
    expect(errorCodeOf(await rejectionOf(store.put('a/b', 'below it')))).toBe('KEY_CONFLICT');
    await store.put('c/d', 'below c');
    expect(errorCodeOf(await rejectionOf(store.put('c', 'over the folder')))).toBe('KEY_CONFLICT');
    expect((await collect(store.list(''))).map((info) => info.key)).toEqual(['a', 'c/d']);
  });

  it('does not list the temp file of a write that crashed before its rename', async () => {
    const store = await freshFileStore();
    await store.put('runs/r1/done.txt', 'done');
    await writeFile(join(store.rootDirectory, 'runs/r1/.hat-tmp-0123456789abcdef'), 'half');
    expect((await collect(store.list('runs/'))).map((info) => info.key)).toEqual(['runs/r1/done.txt']);
  });
});

describe('S3 artifact store against s3rver', () => {
  it('lists more than 1000 keys across pages, in order', async () => {
    const store = s3.store();
    const keys = Array.from({ length: 1100 }, (_, index) => `many/${String(index).padStart(5, '0')}.json`);
    let next = 0;
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        while (next < keys.length) {
          const key = keys[next++];
          await store.put(key, '{}');
        }
      }),
    );
    const commands = recordCommands(store);
    const listed = await collect(store.list('many/'));
    expect(listed.map((info) => info.key)).toEqual(keys);
    expect(commands).toEqual(['ListObjectsV2Command', 'ListObjectsV2Command']);
    expect(listed.every((info) => info.bytes === 2)).toBe(true);
  });

  it('aborts a failed multipart upload: parts already sent never become the object', async () => {
    const store = s3.store({ partSizeBytes: 5 * 1024 * 1024 });
    const commands = recordCommands(store);
    await expect(store.put('mp/partial.bin', failingStream(12 * 1024 * 1024))).rejects.toThrow(
      'producer crashed midway',
    );
    expect(commands).toContain('UploadPartCommand');
    expect(commands).toContain('AbortMultipartUploadCommand');
    expect(commands).not.toContain('CompleteMultipartUploadCommand');
    expect(await store.head('mp/partial.bin')).toBeUndefined();
    expect(await collect(store.list('mp/'))).toEqual([]);
  });

  it('creates stores by URI scheme with settings from the environment', async () => {
    const uri = s3.freshUri();
    const store = createArtifactStore(`${uri}/`, s3.env);
    try {
      expect(store).toBeInstanceOf(S3ArtifactStore);
      expect(store.rootUri).toBe(uri);
      await store.put('x.txt', 'via factory');
      expect(
        (await s3.store({ prefix: uri.slice(`s3://${s3.server.bucket}/`.length) }).getBuffer('x.txt')).toString(),
      ).toBe('via factory');
    } finally {
      await store.close();
    }
  });

  it('reports a missing bucket as NO_SUCH_BUCKET', async () => {
    const store = createArtifactStore('s3://no-such-bucket-here/p', s3.env);
    try {
      expect(errorCodeOf(await rejectionOf(store.put('x', 'y')))).toBe('NO_SUCH_BUCKET');
    } finally {
      await store.close();
    }
  });
});

describe('S3 faults', () => {
  let server: Server;
  let requests = 0;
  beforeAll(async () => {
    server = createServer((request, response) => {
      requests += 1;
      request.resume();
      response.writeHead(500, { 'content-type': 'application/xml' });
      response.end(
        '<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>',
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const storeAt = (endpoint: string, maxAttempts: number) =>
    new S3ArtifactStore({
      bucket: 'bucket',
      settings: { endpoint, accessKeyId: 'k', secretAccessKey: 's', maxAttempts },
    });

  it('retries 5xx in the SDK and surfaces TransientError when attempts run out', async () => {
    const store = storeAt(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 3);
    requests = 0;
    try {
      const error = await rejectionOf(store.getBuffer('runs/x.bin'));
      expect(error).toBeInstanceOf(TransientError);
      expect(errorCodeOf(error)).toBe('S3_UNAVAILABLE');
      expect(error.message).toContain('get s3://bucket/runs/x.bin failed after 3 attempts: InternalError');
      expect(requests).toBe(3);
      expect(errorCodeOf(await rejectionOf(collect(store.list('runs/'))))).toBe('S3_UNAVAILABLE');
    } finally {
      await store.close();
    }
  });

  it('surfaces an unreachable endpoint as TransientError', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const store = storeAt(`http://127.0.0.1:${port}`, 2);
    try {
      const error = await rejectionOf(store.put('x.bin', 'data'));
      expect(error).toBeInstanceOf(TransientError);
      expect(error.message).toMatch(/^\[S3_UNAVAILABLE\] put s3:\/\/bucket\/x\.bin failed/);
    } finally {
      await store.close();
    }
  });
});

describe('local S3 server', () => {
  it('removes its temp directory on stop unless asked to keep it, and stops twice safely', async () => {
    const server = await startLocalS3Server({ bucket: 'kept-or-not' });
    expect(existsSync(server.directory)).toBe(true);
    await server.stop();
    await server.stop();
    expect(existsSync(server.directory)).toBe(false);
    await expect(fetch(`${server.endpoint}/kept-or-not`)).rejects.toThrow();

    const kept = await startLocalS3Server({ bucket: 'kept', keepDirectory: true });
    const store = createArtifactStore(`s3://kept/p`, kept.env);
    const info: ObjectInfo = await store.put('a.txt', 'still here');
    await store.close();
    await kept.stop();
    try {
      expect(info.bytes).toBe(10);
      expect(existsSync(kept.directory)).toBe(true);
      const again = await startLocalS3Server({ bucket: 'kept', directory: kept.directory });
      const reopened = createArtifactStore('s3://kept/p', again.env);
      expect((await reopened.getBuffer('a.txt')).toString()).toBe('still here');
      await reopened.close();
      await again.stop();
      expect(existsSync(kept.directory)).toBe(true);
    } finally {
      await rm(kept.directory, { recursive: true, force: true });
    }
  });
});
