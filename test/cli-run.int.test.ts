import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../shared/artifacts/local-s3-server';
import { readManifest } from '../shared/artifacts/manifest';
import type { RunStatus } from '../queues/runs/run-control';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHat, startHat, type HatProcess } from './support/hat-process';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * The CLI as an operator uses it: spawned `node dist/cli/main.js` processes against real Redis
 * and a real local S3-compatible server.
 */
describe('hat run / runs / stage (spawned CLI)', () => {
  let server: LocalS3Server;
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  const workers: HatProcess[] = [];

  beforeAll(async () => {
    server = await startLocalS3Server({ bucket: 'cli-test' });
  });
  afterAll(async () => {
    await server.stop();
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-cli-'));
    env = {
      ...server.env,
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: `s3://${server.bucket}/${kit.prefix}`,
      HAT_LOG_LEVEL: 'warn',
    };
  });
  afterEach(async () => {
    for (const worker of workers.splice(0)) {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
      await worker.exited;
    }
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const writeConfig = async (name: string, text: string) => {
    const file = join(directory, name);
    await writeFile(file, text);
    return file;
  };

  it('hat stage runs a stage in-process without Redis (exit 0) and reports a bad config with file, line and field (exit 2)', async () => {
    const config = await writeConfig('stage.yaml', 'parts: 3\nrecordsPerPart: 2\n');
    const out = `s3://${server.bucket}/${kit.prefix}/local-stage`;
    const noRedis = { ...env, REDIS_URL: 'redis://127.0.0.1:1' };
    const ok = await runHat(['stage', 'fanout-demo', '--config', config, '--out', out, '--json'], noRedis);
    expect(ok.stderr).toContain('fanout-demo: completed, 3/3 parts');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({ manifestUri: `${out}/manifest.json`, parts: 3, records: 6 });
    const store = createArtifactStore(out, server.env);
    try {
      expect((await readManifest(store, 'manifest.json')).objects.map((object) => object.key)).toEqual([
        'part-00000.jsonl.gz',
        'part-00001.jsonl.gz',
        'part-00002.jsonl.gz',
      ]);
    } finally {
      await store.close();
    }

    const bad = await writeConfig('bad-stage.yaml', 'parts: 3\nrecordsPerPart: -1\ncolour: red\n');
    const refused = await runHat(['stage', 'fanout-demo', '--config', bad, '--out', out], noRedis);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      '[STAGE_INPUT_INVALID] the config of stage "fanout-demo" is invalid; fix the fields named below (2 problems)',
    );
    expect(refused.stderr).toContain(`${bad}: line 2: recordsPerPart:`);
    expect(refused.stderr).toContain(`${bad}: line 3: colour: unknown key "colour"`);
    expect((await runHat(['stage', 'no-such-stage', '--out', out], noRedis)).code).toBe(2);
  });

  it('hat run --wait shows progress and the report location; hat runs show/list --json agree; a failed run exits 1', async () => {
    const worker = startHat(['worker', '--stages', 'fanout-demo,noop,runs', '--concurrency', '4'], env);
    workers.push(worker);
    const config = await writeConfig(
      'run.yaml',
      [
        'runId: cli-ok',
        'stages:',
        '  fanout-demo: { parts: 12, partDelayMs: 400 }',
        '  noop:',
        '    inputs: ["${stages.fanout-demo.manifestUri}"]',
        '',
      ].join('\n'),
    );
    const run = await runHat(['run', config, '--wait'], env);
    expect(run.stderr).toContain('enqueued run cli-ok (stages: fanout-demo, noop)');
    expect(run.stderr).toMatch(/fanout-demo: running, \d+\/12 parts/);
    expect(run.stderr).toMatch(/run cli-ok completed in [\d.]+ s/);
    const reportUri = `s3://${server.bucket}/${kit.prefix}/runs/cli-ok/run-report.html`;
    expect(run.stderr).toContain(`report:       ${reportUri}`);
    expect(run.stdout.trim()).toBe(reportUri);
    expect(run.code).toBe(0);

    const shown = await runHat(['runs', 'show', 'cli-ok', '--json'], env);
    expect(shown.code).toBe(0);
    const status = JSON.parse(shown.stdout) as RunStatus;
    expect(status).toMatchObject({ runId: 'cli-ok', state: 'completed', reportHtmlUri: reportUri });
    expect(status.stages.map((stage) => [stage.name, stage.state, stage.partsDone, stage.partsTotal])).toEqual([
      ['fanout-demo', 'completed', 12, 12],
      ['noop', 'completed', 0, 0],
    ]);
    const store = createArtifactStore(`s3://${server.bucket}/${kit.prefix}`, server.env);
    try {
      const manifest = runManifestSchema.parse(
        JSON.parse((await store.getBuffer('runs/cli-ok/run-manifest.json')).toString()),
      );
      expect(manifest.stages.map((stage) => [stage.name, stage.status, stage.objects])).toEqual([
        ['fanout-demo', 'completed', 12],
        ['noop', 'completed', undefined],
      ]);
      expect((await store.getBuffer('runs/cli-ok/run-report.html')).toString()).toContain('<table>');
    } finally {
      await store.close();
    }

    const failing = await writeConfig(
      'fail.yaml',
      'runId: cli-bad\nstages:\n  fanout-demo: { parts: 3, faults: { badInput: [0] } }\n',
    );
    const failed = await runHat(['run', failing, '--wait', '--json'], env);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ runId: 'cli-bad', state: 'failed' });
    expect(failed.stderr).toMatch(/hat: \[RUN_FAILED\] run cli-bad failed/);

    const listed = await runHat(['runs', 'list', '--json'], env);
    expect(
      (JSON.parse(listed.stdout) as Array<{ runId: string; state: string }>)
        .map((item) => [item.runId, item.state])
        .sort(),
    ).toEqual([
      ['cli-bad', 'failed'],
      ['cli-ok', 'completed'],
    ]);
    expect((await runHat(['runs', 'cancel', 'cli-ok'], env)).code).toBe(2);
    expect((await runHat(['runs', 'show', 'nope', '--json'], env)).code).toBe(2);

    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  });

  it('hat run reports every problem of an invalid config in one pass (exit 2) and enqueues nothing', async () => {
    const config = await writeConfig(
      'invalid.yaml',
      [
        'stages:',
        '  fanout-demo:',
        '    parts: 0',
        '  colect: {}',
        '  noop:',
        '    inputs: ["${stages.shard.manifestUri}"]',
        '',
      ].join('\n'),
    );
    const result = await runHat(['run', config], env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('[BAD_RUN_CONFIG]');
    expect(result.stderr).toContain(`${config}: line 3: stages.fanout-demo.parts:`);
    expect(result.stderr).toContain(`${config}: line 4: stages.colect: unknown stage "colect"`);
    expect(result.stderr).toContain(
      `${config}: line 6: stages.noop.inputs[0]: \${stages.shard.manifestUri} refers to stage "shard"`,
    );
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it("hat demo runs the demo config through real queues on a local S3-compatible server, the pipeline's trainer training the handoff on the shard it reads from S3, and prints the report location", async () => {
    const demoEnv = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: undefined, HAT_LOG_LEVEL: 'warn' };
    // The demo command with a small pipeline (the full examples/demo-run.yaml is `make demo`'s job).
    const smallDemo = join(directory, 'small-demo.yaml');
    await writeFile(
      smallDemo,
      [
        'seed: 3',
        'handoffs:',
        '  sft:',
        '    after: [shard]',
        '    pollSeconds: 1',
        '    timeoutMinutes: 5',
        '    trainer: { executor: command, config: { maxSteps: 2, model: { layers: 1, hidden: 32, heads: 2, kvHeads: 1, headDim: 16, intermediate: 64 } } }',
        'stages:',
        '  collect: { generate: { count: 12, seed: 3 }, tasksPerPart: 6 }',
        '  augment: { inputs: ["${stages.collect.manifestUri}"], variantsPerTrajectory: 1, variantPool: 4 }',
        '  shard: { inputs: ["${stages.augment.manifestUri}"], sequenceLength: 8192, validationFraction: 0.2 }',
        '  noop: { label: "${checkpoints.sft.model} at ${checkpoints.sft.endpoint}" }',
        '',
      ].join('\n'),
    );
    // Training in Python included: minutes on a busy 2-core machine.
    const demo = await runHat(['demo', '--config', smallDemo], demoEnv, { cwd: directory, timeoutMs: 280_000 });
    expect(demo.stderr).toContain('started a local S3-compatible server');
    expect(demo.code).toBe(0);
    const reportUri = demo.stdout.trim();
    expect(reportUri).toMatch(/^s3:\/\/hat-demo\/demo\/runs\/run-\d{8}T\d{6}Z-[0-9a-f]{8}\/run-report\.html$/);
    const runId = reportUri.split('/')[5] ?? '';
    const localCopy = join(directory, '.hat', 'demo', runId, 'run-report.html');
    expect(demo.stderr).toContain(`local copy:   ${localCopy} (with `);
    const report = await readFile(localCopy, 'utf8');
    for (const stage of ['collect', 'augment', 'shard']) expect(report).toContain(stage);
    // The trainer trained on the shard, the checkpoint was served and registered; the stage after the handoff got it.
    expect(demo.stderr).toContain("trainer handoffs sft: answered by the pipeline's trainer");
    expect(demo.stderr).toMatch(
      /trained handoff sft: sft, 2 steps, final loss \d+\.\d{4}, ONNX vs PyTorch max \|logit diff\| [\d.e+-]+ -> hat-trained-sft-v1 served at http:\/\/127\.0\.0\.1:\d+\/v1/,
    );
    expect(report).not.toContain('Simulated training');
    expect(report).toMatch(
      /<b>handoff sft<\/b> after shard: completed; checkpoint hat-trained-sft-v1 at http:\/\/127\.0\.0\.1:\d+\/v1, policy v1, registered by hat-trainer; trained: sft, 2 steps, final loss/,
    );
    expect(report).toContain('aria-label="loss curve of handoff sft"');
    expect(report.indexOf('<b>handoff sft</b>')).toBeLessThan(report.indexOf('<li>noop: completed</li>'));
    // The key figures: collect's acceptance rate, augment's variant checks, shard's token counts.
    const keyFigures = report.slice(report.indexOf('<h2>Key figures</h2>'));
    expect(keyFigures).toMatch(/<td>acceptance rate<\/td><td class="n">\d+\.\d%<\/td>/);
    expect(keyFigures).toMatch(/<td>round_trip check passed<\/td><td class="n"[^>]*>\d+\.\d%<\/td>/);
    expect(keyFigures).toMatch(/<td>train tokens<\/td><td class="n">[1-9][\d,]*<\/td>/);
    expect(keyFigures).toContain('<a href="shard/README.md">dataset card</a>: <code>s3://hat-demo/demo/runs/');
    // Every stage report the run report links lies beside the local copy, so its links open offline.
    const linked = [...keyFigures.matchAll(/<a href="([^"]+)">/g)].map((match) => match[1] ?? '');
    expect(linked).toEqual(expect.arrayContaining(['collect/report.html', 'augment/report.html', 'shard/README.md']));
    for (const href of linked) expect(existsSync(join(directory, '.hat', 'demo', runId, href))).toBe(true);
    // The S3 server's files stay behind for inspection.
    expect(existsSync(join(directory, '.hat', 'demo-s3', 'hat-demo'))).toBe(true);
  }, 300_000);
});
