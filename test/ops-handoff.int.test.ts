import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readManifest } from '../shared/artifacts/manifest';
import type { RunStatus } from '../queues/runs/run-control';
import { getRunStatus } from '../queues/runs/run-control';
import type { TrainingRequest } from '../queues/runs/run-handoff';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * The trainer handoff through real queues: stages before it, the training request, a run that
 * waits (seen by `hat runs show`), a checkpoint registered by `hat checkpoint register` or written
 * by the trainer itself, the held-back stages running on it, and the timeout.
 */
describe('trainer handoff', () => {
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  let server: OpenAiTestServer;

  beforeAll(async () => {
    server = await OpenAiTestServer.start({ models: ['ckpt-1'] });
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-handoff-'));
    env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' };
  });
  afterEach(async () => {
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const hat = (...argv: string[]) => runHatInProcess(env, ...argv);
  const writeConfig = async (text: string) => {
    const file = join(directory, 'run.yaml');
    await writeFile(file, text);
    return file;
  };
  const status = (runId: string) => getRunStatus(kit.context, runId);
  const finished = (runId: string) =>
    waitFor(async () => {
      const current = await status(runId);
      return current.state === 'completed' || current.state === 'failed' ? current : undefined;
    }, 30_000);

  it('writes the training request after collect, waits, and runs replay on the checkpoint `hat checkpoint register` hands back', async () => {
    await kit.startWorkers({ queues: ['collect', 'replay', 'runs'] });
    const config = await writeConfig(
      [
        'runId: handoff-ok',
        'handoff:',
        '  after: [collect]',
        '  before: [replay]',
        '  timeoutMinutes: 10',
        '  hyperparameters: { learningRate: 0.00001, epochs: 2 }',
        'stages:',
        '  collect: { generate: { count: 4, seed: 7 }, tasksPerPart: 2 }',
        '  replay:',
        '    inputs: ["${stages.collect.manifestUri}"]',
        '    target: { adapter: openai, baseUrl: "${checkpoint.endpoint}", model: "${checkpoint.model}", retryInitialDelayMs: 10 }',
        '',
      ].join('\n'),
    );
    const run = await hat('run', config);
    expect([run.code, run.stderr]).toEqual([0, '']);

    const waiting = await waitFor(async () => {
      const current = await status('handoff-ok');
      return current.handoffs?.[0]?.state === 'waiting-for-checkpoint' ? current : undefined;
    });
    expect(waiting.state).toBe('running');
    expect(waiting.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['collect', 'completed'],
      ['replay', 'waiting'],
    ]);
    expect(
      Date.parse(waiting.handoffs?.[0]?.deadline ?? '') - Date.parse(waiting.handoffs?.[0]?.requestedAt ?? ''),
    ).toBe(600_000);
    const shown = await hat('runs', 'show', 'handoff-ok');
    expect(shown.stdout).toContain('train (handoff after collect, before replay): waiting-for-checkpoint');
    expect(shown.stdout).toContain(`training request: ${kit.artifactsRoot}/runs/handoff-ok/train/request.json`);
    expect(shown.stdout).toContain(
      'register with:    hat checkpoint register handoff-ok --endpoint <url> --model <name> (or --model-dir <dir>)',
    );

    const request = JSON.parse(
      (await kit.store.getBuffer('runs/handoff-ok/train/request.json')).toString(),
    ) as TrainingRequest;
    const collectManifest = await readManifest(kit.store, 'runs/handoff-ok/collect/manifest.json');
    expect(request).toMatchObject({
      runId: 'handoff-ok',
      hyperparameters: { learningRate: 0.00001, epochs: 2 },
      then: ['replay'],
      checkpoint: {
        markerUri: `${kit.artifactsRoot}/runs/handoff-ok/train/checkpoint.json`,
        required: ['endpoint', 'model'],
      },
    });
    expect(request.codeVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(request.datasets).toEqual([
      {
        stage: 'collect',
        manifestUri: `${kit.artifactsRoot}/runs/handoff-ok/collect/manifest.json`,
        objects: expect.any(Array),
      },
    ]);
    const trajectories = collectManifest.objects.filter((object) => object.kind === 'trajectories');
    expect(
      request.datasets[0]?.objects.filter((object) => object.kind === 'trajectories').map((object) => object.sha256),
    ).toEqual(trajectories.map((object) => object.sha256));
    expect(server.chatRequests).toHaveLength(0);

    // An endpoint with a key in it is refused without repeating the key, and nothing is registered.
    const keyed = await hat(
      'checkpoint',
      'register',
      'handoff-ok',
      '--endpoint',
      `${server.baseUrl}?api_key=sk-SECRET123`,
      '--model',
      'ckpt-1',
    );
    expect(keyed.code).toBe(2);
    expect(keyed.stderr).toMatch(
      /\[URI_CREDENTIALS\] --endpoint "[^"]*\?api_key=\[redacted\]" holds credentials in the URL \(the query parameter "api_key"\)/,
    );
    expect(keyed.stderr).not.toContain('SECRET123');
    expect(await kit.store.head('runs/handoff-ok/train/checkpoint.json')).toBeUndefined();

    // A model the endpoint does not serve is refused, and nothing is registered.
    const wrong = await hat('checkpoint', 'register', 'handoff-ok', '--endpoint', server.baseUrl, '--model', 'ckpt-2');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain(
      `--model: the server at ${server.baseUrl} does not serve "ckpt-2" (it lists: ckpt-1)`,
    );
    expect(await kit.store.head('runs/handoff-ok/train/checkpoint.json')).toBeUndefined();

    const registered = await hat(
      'checkpoint',
      'register',
      'handoff-ok',
      '--endpoint',
      server.baseUrl,
      '--model',
      'ckpt-1',
    );
    expect(registered.stderr).toBe('');
    expect(registered.stdout).toContain(
      `registered checkpoint ckpt-1 at ${server.baseUrl} for handoff train of run handoff-ok`,
    );
    expect(registered.code).toBe(0);

    const done = await finished('handoff-ok');
    expect([done.state, done.error]).toEqual(['completed', undefined]);
    expect(done.handoffs?.[0]).toMatchObject({
      state: 'completed',
      checkpoint: { endpoint: server.baseUrl, model: 'ckpt-1' },
    });
    // Replay ran the recorded sessions against the registered checkpoint.
    expect(server.chatRequests.length).toBeGreaterThan(0);
    expect(server.chatRequests.every((request) => request.body.model === 'ckpt-1')).toBe(true);

    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/handoff-ok/run-manifest.json')).toString()),
    );
    expect(manifest.stages.map((stage) => [stage.name, stage.status])).toEqual([
      ['collect', 'completed'],
      ['replay', 'completed'],
    ]);
    expect(manifest.handoffs?.[0]).toMatchObject({
      status: 'completed',
      after: ['collect'],
      before: ['replay'],
      requestUri: `${kit.artifactsRoot}/runs/handoff-ok/train/request.json`,
      checkpoint: { endpoint: server.baseUrl, model: 'ckpt-1', registeredBy: 'cli' },
    });
    expect(await kit.store.head('runs/handoff-ok/replay/manifest.json')).toBeDefined();
    const report = (await kit.store.getBuffer('runs/handoff-ok/run-report.html')).toString();
    expect(report).toContain(
      `Trainer handoff train after collect: <b>completed</b>; replay ran on checkpoint <code>ckpt-1</code> at <code>${server.baseUrl}</code>`,
    );
    // The latency SLO verdict of the replay, as its own manifest records it, with each objective.
    const replayStats = (await readManifest(kit.store, 'runs/handoff-ok/replay/manifest.json')).stats as {
      verdict: string;
    };
    const replayFigures = manifest.stages[1]?.figures ?? [];
    expect(replayFigures[0]).toMatchObject({ label: 'latency SLO', value: replayStats.verdict });
    expect(replayFigures.filter((figure) => /^P\d+ /.test(figure.label)).length).toBeGreaterThan(0);
    expect(report).toContain('<td>latency SLO</td>');
    // `hat runs show` lists the same figures under each completed stage.
    const shownDone = await hat('runs', 'show', 'handoff-ok');
    expect(shownDone.stdout).toMatch(
      / {2}collect: completed, 2\/2 parts, manifest .*\n {4}tasks: 4\n {4}acceptance rate: \d+\.\d% \(tasks with an accepted trajectory\)/,
    );
    expect(shownDone.stdout).toContain(
      `    ${replayStats.verdict === 'pass' ? '' : '! '}latency SLO: ${replayStats.verdict} (target `,
    );

    // One replay stage job, under the id planned with the run.
    const replayJobs = (
      await kit.context
        .queue('replay')
        .getJobs(['completed', 'failed', 'waiting', 'active', 'delayed', 'waiting-children'])
    ).filter((job) => job.name === 'stage');
    expect(replayJobs.map((job) => job.id)).toEqual([done.stages[1]?.jobId]);

    const again = await hat('checkpoint', 'register', 'handoff-ok', '--endpoint', server.baseUrl, '--model', 'ckpt-1');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(
      '[CHECKPOINT_ALREADY_USED] handoff train of run handoff-ok already gave replay the checkpoint ckpt-1',
    );
  });

  it('picks up a marker the trainer writes itself, filling ${checkpoint.model} into the stage that waits', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
    const config = await writeConfig(
      [
        'runId: handoff-poll',
        'handoff: { after: [fanout-demo], before: [noop], pollSeconds: 1 }',
        'stages:',
        '  fanout-demo: { parts: 2 }',
        '  noop: { label: "trained ${checkpoint.model}", inputs: ["${stages.fanout-demo.manifestUri}"] }',
        '',
      ].join('\n'),
    );
    expect((await hat('run', config)).code).toBe(0);
    await waitFor(async () => (await status('handoff-poll')).handoffs?.[0]?.state === 'waiting-for-checkpoint');
    await kit.store.put(
      'runs/handoff-poll/train/checkpoint.json',
      JSON.stringify({ endpoint: 'http://trainer-serve:8000/v1', model: 'nightly-42' }),
    );
    const done = await finished('handoff-poll');
    expect(done.state).toBe('completed');
    const noop = await kit.context.queue('noop').getJob(done.stages[1]?.jobId ?? '');
    expect(noop?.returnvalue.output).toEqual({
      label: 'trained nightly-42',
      inputs: [{ uri: `${kit.artifactsRoot}/runs/handoff-poll/fanout-demo/manifest.json`, objects: 2 }],
    });
  });

  it('fails the run with [CHECKPOINT_TIMEOUT] when no checkpoint comes, and `hat runs retry` waits again', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
    const config = await writeConfig(
      [
        'runId: handoff-late',
        'handoff: { after: [fanout-demo], before: [noop], timeoutMinutes: 0.02, pollSeconds: 1 }',
        'stages:',
        '  fanout-demo: { parts: 1 }',
        '  noop: { label: "${checkpoint.model}" }',
        '',
      ].join('\n'),
    );
    expect((await hat('run', config)).code).toBe(0);
    const failed: RunStatus = await finished('handoff-late');
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(
      /^\[CHECKPOINT_TIMEOUT\] run handoff-late: no checkpoint was registered for handoff train within 1 s of the training request .*request\.json; train on it, then `hat checkpoint register handoff-late --endpoint <url> --model <name> \(or --model-dir <dir>\)` .* and `hat runs retry handoff-late` to wait again/,
    );
    expect(failed.handoffs?.[0]?.state).toBe('failed');
    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/handoff-late/run-manifest.json')).toString()),
    );
    expect(manifest.stages.find((stage) => stage.name === 'noop')).toMatchObject({
      status: 'not-run',
      error: expect.stringMatching(/^waits for the trainer handoff train, which failed: \[CHECKPOINT_TIMEOUT\]/),
    });

    // Registering against a failed handoff works; the retry then finds the checkpoint.
    const registered = await hat(
      'checkpoint',
      'register',
      'handoff-late',
      '--endpoint',
      server.baseUrl,
      '--model',
      'ckpt-1',
      '--json',
    );
    expect(JSON.parse(registered.stdout)).toMatchObject({ handoffState: 'failed', woken: false });
    const retried = await hat('runs', 'retry', 'handoff-late');
    expect(retried.stdout).toContain('stage(s) train');
    const done = await waitFor(async () => {
      const current = await status('handoff-late');
      return current.state === 'completed' ? current : undefined;
    }, 30_000);
    expect(done.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['fanout-demo', 'completed'],
      ['noop', 'completed'],
    ]);
  });

  it('cancels a run that waits for its checkpoint: the waiting handoff is removed, and hat runs show calls the stage cancelled as the run manifest does', async () => {
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'] });
    const config = await writeConfig(
      [
        'runId: handoff-cancel',
        'handoff: { after: [fanout-demo], before: [noop] }',
        'stages:',
        '  fanout-demo: { parts: 1 }',
        '  noop: { label: "${checkpoint.model}" }',
        '',
      ].join('\n'),
    );
    expect((await hat('run', config)).code).toBe(0);
    await waitFor(async () => (await status('handoff-cancel')).handoffs?.[0]?.state === 'waiting-for-checkpoint');
    const cancelled = await hat('runs', 'cancel', 'handoff-cancel');
    expect(cancelled.code).toBe(0);
    const done = await waitFor(async () => {
      const current = await status('handoff-cancel');
      return current.state === 'cancelled' ? current : undefined;
    });
    expect(done.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['fanout-demo', 'completed'],
      ['noop', 'cancelled'],
    ]);
    expect(done.handoffs?.[0]?.state).toBe('cancelled');
    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/handoff-cancel/run-manifest.json')).toString()),
    );
    expect([manifest.status, manifest.handoffs?.[0]?.status, manifest.stages[1]?.status]).toEqual([
      'cancelled',
      'cancelled',
      'cancelled',
    ]);
  });
});
