import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { getStage } from '../queues/stage-kit/stage-registry';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { formatFigure } from '../queues/stage-kit/stage-summary';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { silentLogger } from '../shared/log/logger';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { registerCatalogStages } from '../workers/stage-catalog';
import { waitFor } from './support/queue-test-kit';
import { hatMain } from './support/hat-process';
import { runHatInProcess } from './support/hat-in-process';

/** Issue #20: small things a user meets at the terminal. */
describe('CLI papercuts', () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-papercuts-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  /** `hat run <config>` with no Redis to reach: only what the preflight refuses is seen. */
  const preflightOnly = (config: string) =>
    runHatInProcess(
      {
        ...process.env,
        HAT_LOG_LEVEL: 'silent',
        HAT_ARTIFACTS: pathToFileURL(join(directory, 'artifacts')).href,
        REDIS_URL: 'redis://127.0.0.1:1',
      },
      'run',
      config,
    );

  it('ends quietly with 0 when the reader of its output goes away (| head)', async () => {
    const objects = join(directory, 'objects');
    await mkdir(objects);
    await Promise.all(
      Array.from({ length: 3_000 }, (_, index) => writeFile(join(objects, `object-${index}.json`), '{}')),
    );
    const child = spawn(process.execPath, [hatMain, 'artifacts', 'ls', `${pathToFileURL(objects).href}/`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // Like `head -n 1`: read the first chunk, then close the pipe while hat is still writing.
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).not.toContain('EPIPE');
    expect(code).toBe(0);
  }, 60_000);

  it('explains the three-slash form for file://host/path (exit 2), in --out and in a run config', async () => {
    const stage = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'stage',
      'fanout-demo',
      '--out',
      'file://tmp/hat-out',
    );
    expect(stage.code).toBe(2);
    expect(stage.stderr).toContain(
      '[BAD_ARTIFACT_URI] artifact URI "file://tmp/hat-out" names the host "tmp" (two slashes after "file:"); a local path takes three: file:///tmp/hat-out',
    );
    const config = join(directory, 'run.yaml');
    await writeFile(config, 'artifacts: file://data/hat\nstages:\n  fanout-demo: { parts: 1 }\n');
    const run = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'run',
      config,
      '--skip-endpoint-checks',
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('a local path takes three: file:///data/hat');
  });

  it('never shows a shortfall as 100% in stage figures (hat runs show, run report)', () => {
    expect(formatFigure({ value: 0.99995, unit: 'ratio' })).toBe('99.995%');
    expect(formatFigure({ value: 1, unit: 'ratio' })).toBe('100.0%');
  });

  it("sweeps the temp file a killed writer left when the part runs again, and leaves a live writer's alone", async () => {
    registerCatalogStages();
    const root = join(directory, 'store');
    const output = join(root, 'runs', 'swept', 'fanout-demo');
    await mkdir(output, { recursive: true });
    // A real writer, killed half-way through a put: its temp file stays behind.
    const writer = `
      const { PassThrough } = require('node:stream');
      const { FileArtifactStore } = require(${JSON.stringify(join(__dirname, '..', 'dist', 'shared', 'artifacts', 'file-artifact-store.js'))});
      const body = new PassThrough();
      new FileArtifactStore(${JSON.stringify(root)}).put('runs/swept/fanout-demo/part-00000.jsonl.gz', body);
      body.write(Buffer.alloc(1 << 20));
      setInterval(() => undefined, 1000);`;
    const killed = spawn(process.execPath, ['-e', writer], { stdio: 'ignore' });
    const temporaryFiles = async () => (await readdir(output)).filter((name) => name.startsWith('.hat-tmp-'));
    await waitFor(async () => (await temporaryFiles()).length === 1, 20_000, 50);
    killed.kill('SIGKILL');
    await new Promise((resolve) => killed.once('exit', resolve));
    const leftover = await temporaryFiles();
    // A temp file of this (live) process, as a concurrent write would have.
    const live = new FileArtifactStore(root);
    const liveBody = new (await import('node:stream')).PassThrough();
    const livePut = live.put('runs/swept/fanout-demo/other.bin', liveBody);
    liveBody.write('x');
    await waitFor(async () => (await temporaryFiles()).length === 2, 20_000, 50);

    const stores = createStoreCache({});
    await runStageLocally(
      getStage('fanout-demo'),
      { parts: 2 },
      { store: live, outputPrefix: 'runs/swept/fanout-demo/', openObject: stores.openObject, logger: silentLogger() },
    );
    const remaining = await temporaryFiles();
    expect(remaining).toHaveLength(1);
    expect(remaining).not.toContain(leftover[0]);
    liveBody.end();
    await livePut;
    expect(await temporaryFiles()).toEqual([]);
    await stores.close();
  }, 60_000);

  it('hat run checks the contents of local task files and harness directories before enqueueing (exit 2)', async () => {
    const { cp } = await import('node:fs/promises');
    const { gzipSync } = await import('node:zlib');
    const harness = join(directory, 'harness');
    await cp(join(__dirname, '..', 'examples', 'harness', 'live-host'), harness, { recursive: true });
    await writeFile(
      join(harness, 'tools', 'get_sku_stock.json'),
      '{"type": "function", "function": {"name": "get_sku_stock", "parameters": {"type": "object", "properties": ',
    );
    const tasks = join(directory, 'tasks.jsonl.gz');
    const whole = gzipSync(Buffer.from('{"id":"t1"}\n'.repeat(200)));
    await writeFile(tasks, whole.subarray(0, Math.floor(whole.length / 2)));
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      [
        'runId: content-checks',
        'stages:',
        '  collect:',
        `    tasks: [${JSON.stringify(pathToFileURL(tasks).href)}]`,
        `    harness: ${harness}`,
        '',
      ].join('\n'),
    );
    const result = await preflightOnly(config);
    expect(result.code).toBe(2);
    // Each finding keeps the code the stage would have failed with.
    expect(result.stderr).toMatch(
      /line 4: stages\.collect\.tasks\[0\]: \[BAD_JSONL\] .*tasks\.jsonl\.gz: not valid gzip data/,
    );
    expect(result.stderr).toMatch(/line 5: stages\.collect\.harness: \[[A-Z_]+\] .*get_sku_stock\.json/);
  });

  it('hat run refuses an empty task file (plain or gzip) in the preflight, naming the field (exit 2)', async () => {
    const { gzipSync } = await import('node:zlib');
    const empty = join(directory, 'empty.jsonl');
    const emptyGzip = join(directory, 'empty.jsonl.gz');
    await writeFile(empty, '');
    await writeFile(emptyGzip, gzipSync(Buffer.alloc(0)));
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      [
        'runId: empty-tasks',
        'stages:',
        '  collect:',
        `    tasks: [${empty}, ${pathToFileURL(emptyGzip).href}]`,
        '',
      ].join('\n'),
    );
    const result = await preflightOnly(config);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/line 4: stages\.collect\.tasks\[0\]: \[NO_TASKS\] .*empty\.jsonl holds no tasks/);
    expect(result.stderr).toMatch(
      /line 4: stages\.collect\.tasks\[1\]: \[NO_TASKS\] .*empty\.jsonl\.gz holds no tasks/,
    );
    expect(result.stderr).toContain('hat tasks generate');
  });

  it('hat run refuses a local task file with a byte that is not UTF-8 or a field tasks do not have, in the preflight (exit 2)', async () => {
    const [first, second] = generateTasks({ count: 2, seed: 'preflight', world: { itemCount: 50 } });
    const latin1 = join(directory, 'latin1.jsonl');
    const good = Buffer.from(`${JSON.stringify(first)}\n`);
    const bad = Buffer.from(`${JSON.stringify(second)}\n`);
    await writeFile(latin1, Buffer.concat([good, bad.subarray(0, 30), Buffer.from([0xe9]), bad.subarray(30)]));
    const unknown = join(directory, 'unknown.jsonl');
    await writeFile(unknown, `${JSON.stringify({ ...first, turn: first!.turns })}\n`);
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      ['runId: strict-tasks', 'stages:', '  collect:', `    tasks: [${latin1}, ${unknown}]`, ''].join('\n'),
    );
    const result = await preflightOnly(config);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `stages.collect.tasks[0]: [BAD_ENCODING] ${pathToFileURL(latin1).href}: line 2: byte 31 of the line (byte offset ${good.length + 30} of the file) is not valid UTF-8`,
    );
    expect(result.stderr).toMatch(
      /stages\.collect\.tasks\[1\]: \[UNKNOWN_FIELD\] .*unknown\.jsonl.*line 1: turn: not a field/,
    );
    expect(result.stderr).not.toContain('REDIS_UNAVAILABLE');
  });

  it('hat run refuses a truncated manifest and one that lists a missing object in the preflight (exit 2)', async () => {
    const full = join(directory, 'full');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(full, { recursive: true });
    const part = join(full, 'part-00000.jsonl');
    await writeFile(part, '{"taskId":"t1"}\n');
    const manifest = {
      schemaVersion: 1,
      stage: 'collect',
      runId: 'r',
      createdAt: '2025-01-01T00:00:00.000Z',
      codeVersion: 'test',
      objects: [
        {
          key: 'part-00000.jsonl',
          uri: pathToFileURL(part).href,
          format: 'jsonl',
          schemaVersion: 1,
          kind: 'trajectories',
          bytes: 16,
          sha256: '0'.repeat(64),
        },
        {
          key: 'part-00001.jsonl',
          uri: pathToFileURL(join(full, 'part-00001.jsonl')).href,
          format: 'jsonl',
          schemaVersion: 1,
          kind: 'trajectories',
          bytes: 16,
          sha256: '0'.repeat(64),
        },
      ],
      lineage: { inputs: [], configHash: '0'.repeat(64), codeVersion: 'test' },
      stats: {},
    };
    const listing = join(full, 'manifest.json');
    await writeFile(listing, JSON.stringify(manifest));
    const truncated = join(directory, 'truncated-manifest.json');
    await writeFile(truncated, JSON.stringify(manifest).slice(0, 120));
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      [
        'runId: bad-manifests',
        'stages:',
        '  augment:',
        `    trajectories: [${pathToFileURL(listing).href}, ${pathToFileURL(truncated).href}]`,
        '',
      ].join('\n'),
    );
    const result = await preflightOnly(config);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /stages\.augment\.trajectories\[0\]: \[MANIFEST_OBJECT_MISSING\] .*manifest\.json lists 1 object\(s\) that are missing or changed size \(.*part-00001\.jsonl\); rerun the collect stage/,
    );
    expect(result.stderr).toMatch(
      /stages\.augment\.trajectories\[1\]: \[BAD_MANIFEST\] .*truncated-manifest\.json: not valid JSON/,
    );
  });

  it('refuses a run config or harness file that is not UTF-8 with its line and byte offset (exit 2)', async () => {
    const config = join(directory, 'latin1.yaml');
    await writeFile(
      config,
      Buffer.concat([Buffer.from('seed: 1\n# caf'), Buffer.from([0xe9]), Buffer.from('\nstages: {}\n')]),
    );
    const run = await runHatInProcess({ ...process.env, HAT_LOG_LEVEL: 'silent' }, 'run', config);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `[BAD_ENCODING] ${config}: line 2: byte 6 of the line (byte offset 13 of the file) is not valid UTF-8`,
    );

    const { cp } = await import('node:fs/promises');
    const harness = join(directory, 'harness');
    await cp(join(__dirname, '..', 'examples', 'harness', 'live-host'), harness, { recursive: true });
    await writeFile(
      join(harness, 'tools', 'get_sku_stock.json'),
      Buffer.concat([Buffer.from('{"description": "'), Buffer.from([0xb2, 0xe2]), Buffer.from('"}')]),
    );
    const validated = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'harness',
      'validate',
      harness,
    );
    expect(validated.code).toBe(2);
    expect(validated.stderr).toContain(
      'get_sku_stock.json: line 1: byte 18 of the line (byte offset 17 of the file) is not valid UTF-8',
    );
  });
});
