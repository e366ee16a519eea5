import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readManifest } from '../shared/artifacts/manifest';
import { getRunStatus, type RunStatus } from '../queues/runs/run-control';
import type { TrainingRequest } from '../queues/runs/run-handoff';
import type { EpisodeRecord } from '../workers/rl/episode-records';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHatInProcess } from './support/hat-in-process';
import { startHat, type HatProcess } from './support/hat-process';
import { OpenAiTestServer } from './support/openai-test-server';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * A run in the method's order through real queues, a real worker process and a real local
 * OpenAI-compatible server playing each checkpoint: stage instances (`stage: <kind>`), two named
 * handoffs, an on-policy stage in two rounds with a handoff between them, workers killed while
 * the run waits, and checkpoints registered for the wrong handoff or run refused.
 */
describe('runs in the method order', () => {
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  let server: OpenAiTestServer;
  const workers: HatProcess[] = [];

  beforeAll(async () => {
    server = await OpenAiTestServer.start({ models: ['sft-1', 'opd-2', 'opd-3'] });
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(async () => {
    // Locks short enough that a job held by a killed worker comes back within seconds, long enough
    // that a part busy on a loaded machine keeps its lock (a lapsed lock counts as a stall).
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-order-'));
    env = {
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: kit.artifactsRoot,
      HAT_LOG_LEVEL: 'silent',
      HAT_LOCK_DURATION_MS: '10000',
      HAT_STALLED_INTERVAL_MS: '5000',
    };
  });
  afterEach(async () => {
    for (const worker of workers.splice(0)) {
      if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
      await worker.exited;
    }
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const hat = (...argv: string[]) => runHatInProcess(env, ...argv);
  const startWorker = () => {
    const worker = startHat(['worker', '--stages', 'fanout-demo,rl,noop,runs'], env);
    workers.push(worker);
    return worker;
  };
  const killWorker = async (worker: HatProcess) => {
    worker.child.kill('SIGKILL');
    await worker.exited;
  };
  const status = (runId: string) => getRunStatus(kit.context, runId);
  const waitingAt = (runId: string, handoff: string) =>
    waitFor(async () => {
      const current = await status(runId);
      if (current.state === 'failed')
        throw new Error(`run failed while waiting for ${handoff}: ${JSON.stringify(current, null, 1)}`);
      return current.handoffs?.find((entry) => entry.name === handoff)?.state === 'waiting-for-checkpoint'
        ? current
        : undefined;
    }, 60_000).catch(async (error: Error) => {
      throw new Error(`${error.message}\n${JSON.stringify(await status(runId), null, 1)}`);
    });
  const episodes = async (stage: string): Promise<EpisodeRecord[]> => {
    const manifest = await readManifest(kit.store, `runs/order-1/${stage}/manifest.json`);
    const records: EpisodeRecord[] = [];
    for (const object of manifest.objects.filter((entry) => entry.format === 'jsonl.gz' && entry.kind !== 'groups')) {
      for await (const record of readJsonl<EpisodeRecord>(kit.store, object.key)) records.push(record);
    }
    return records;
  };
  const rlJobs = async () =>
    (
      await kit.context
        .queue('rl')
        .getJobs(['completed', 'failed', 'waiting', 'active', 'delayed', 'waiting-children', 'prioritized'])
    ).filter((job) => job.name === 'stage');

  it('runs data -> sft -> two rl rounds with a handoff between -> opd -> a stage on the OPD checkpoint, surviving killed workers while it waits', async () => {
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      [
        'runId: order-1',
        'handoffs:',
        '  sft: { after: [data], pollSeconds: 1, hyperparameters: { epochs: 1 } }',
        '  opd: { after: [rollouts], pollSeconds: 1 }',
        'stages:',
        '  data: { stage: fanout-demo, parts: 2 }',
        '  rollouts:',
        '    stage: rl',
        '    rounds: 2',
        '    generate: { count: 2, seed: 7 }',
        '    groups: 2',
        '    groupSize: 2',
        '    groupsPerPart: 2',
        '    maxTurns: 1',
        '    policy: { adapter: openai, baseUrl: "${checkpoints.sft.endpoint}", model: "${checkpoints.sft.model}", maxRetries: 0 }',
        '  served: { stage: noop, label: "on ${checkpoints.opd.model} v${checkpoints.opd.policyVersion}" }',
        '',
      ].join('\n'),
    );
    let worker = startWorker();
    const run = await hat('run', config);
    expect([run.code, run.stderr]).toEqual([0, '']);

    const atSft = await waitingAt('order-1', 'sft');
    expect(
      atSft.stages.map((stage) => [
        stage.name,
        stage.kind ?? stage.name,
        stage.handoff ?? null,
        stage.policyVersion ?? null,
        stage.state,
      ]),
    ).toEqual([
      ['data', 'fanout-demo', null, null, 'completed'],
      ['rollouts-round-1', 'rl', 'sft', 1, 'waiting'],
      ['rollouts-round-2', 'rl', 'opd-round-1', 2, 'waiting'],
      ['served', 'noop', 'opd', null, 'waiting'],
    ]);
    expect(atSft.handoffs?.map((handoff) => [handoff.name, handoff.state, handoff.policyVersion ?? null])).toEqual([
      ['sft', 'waiting-for-checkpoint', null],
      ['opd-round-1', 'waiting-for-stages', 2],
      ['opd', 'waiting-for-stages', 3],
    ]);
    const shown = await hat('runs', 'show', 'order-1');
    expect(shown.stdout).toContain('  rollouts-round-2 (rl) [policy v2]: waiting');
    expect(shown.stdout).toContain(
      '  opd-round-1 (handoff after rollouts-round-1, before rollouts-round-2, served, policy v2): waiting-for-stages',
    );
    expect(shown.stdout).toContain(
      '    register with:    hat checkpoint register order-1 --handoff sft --endpoint <url> --model <name> (or --model-dir <dir>)',
    );
    const request = JSON.parse(
      (await kit.store.getBuffer('runs/order-1/handoffs/sft/request.json')).toString(),
    ) as TrainingRequest;
    expect(request).toMatchObject({
      handoff: 'sft',
      hyperparameters: { epochs: 1 },
      datasets: [{ stage: 'data' }],
      checkpoint: { required: ['endpoint', 'model'] },
    });
    const dataJob = await kit.context.queue('fanout-demo').getJob(atSft.stages[0]?.jobId ?? '');
    const dataFinishedOn = dataJob?.finishedOn;

    // The worker dies while the run waits; the stage that references the checkpoint has not started, and does not.
    await killWorker(worker);
    worker = startWorker();
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await rlJobs()).toEqual([]);
    expect(server.chatRequests).toHaveLength(0);

    // Checkpoints for the wrong handoff or run are refused with exit 2, and nothing is registered.
    const early = await hat(
      'checkpoint',
      'register',
      'order-1',
      '--handoff',
      'opd',
      '--endpoint',
      server.baseUrl,
      '--model',
      'opd-3',
    );
    expect([early.code, early.stderr]).toEqual([
      2,
      expect.stringContaining(
        '[WRONG_HANDOFF] handoff opd of run order-1 has not asked for training yet (its stages wait for handoff sft)',
      ),
    ]);
    const unknown = await hat(
      'checkpoint',
      'register',
      'order-1',
      '--handoff',
      'dpo',
      '--endpoint',
      server.baseUrl,
      '--model',
      'sft-1',
    );
    expect([unknown.code, unknown.stderr]).toEqual([
      2,
      expect.stringContaining('[WRONG_HANDOFF] run order-1 has no handoff "dpo"; its handoffs: sft, opd-round-1, opd'),
    ]);
    const unnamed = await hat('checkpoint', 'register', 'order-1', '--endpoint', server.baseUrl, '--model', 'sft-1');
    expect([unnamed.code, unnamed.stderr]).toEqual([2, expect.stringContaining('[HANDOFF_REQUIRED]')]);
    const otherRun = await hat(
      'checkpoint',
      'register',
      'order-1',
      '--handoff',
      'sft',
      '--endpoint',
      server.baseUrl,
      '--model',
      'sft-1',
      '--request',
      `${kit.artifactsRoot}/runs/order-0/handoffs/sft/request.json`,
    );
    expect([otherRun.code, otherRun.stderr]).toEqual([2, expect.stringContaining('[WRONG_CHECKPOINT]')]);
    const noRun = await hat(
      'checkpoint',
      'register',
      'order-9',
      '--handoff',
      'sft',
      '--endpoint',
      server.baseUrl,
      '--model',
      'sft-1',
    );
    expect([noRun.code, noRun.stderr]).toEqual([2, expect.stringContaining('[RUN_NOT_FOUND] no run "order-9"')]);
    expect(await kit.store.head('runs/order-1/handoffs/sft/checkpoint.json')).toBeUndefined();
    expect(await kit.store.head('runs/order-1/handoffs/opd/checkpoint.json')).toBeUndefined();

    const sft = await hat(
      'checkpoint',
      'register',
      'order-1',
      '--handoff',
      'sft',
      '--endpoint',
      server.baseUrl,
      '--model',
      'sft-1',
      '--request',
      `${kit.artifactsRoot}/runs/order-1/handoffs/sft/request.json`,
    );
    expect([sft.code, sft.stderr]).toEqual([0, '']);

    // Round 1 samples with the SFT checkpoint (policy version 1), then the run waits for version 2.
    const atRound = await waitingAt('order-1', 'opd-round-1');
    expect(atRound.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['data', 'completed'],
      ['rollouts-round-1', 'completed'],
      ['rollouts-round-2', 'waiting'],
      ['served', 'waiting'],
    ]);
    const round1 = await episodes('rollouts-round-1');
    expect(round1.length).toBe(4);
    expect(new Set(round1.map((record) => record.policy_version))).toEqual(new Set([1]));
    expect(new Set(server.chatRequests.map((entry) => entry.body.model))).toEqual(new Set(['sft-1']));
    const roundRequest = JSON.parse(
      (await kit.store.getBuffer('runs/order-1/handoffs/opd-round-1/request.json')).toString(),
    ) as TrainingRequest;
    expect(roundRequest).toMatchObject({
      handoff: 'opd-round-1',
      policyVersion: 2,
      datasets: [{ stage: 'rollouts-round-1', policyVersion: 1 }],
    });

    await killWorker(worker);
    startWorker();
    const wrongVersion = await hat(
      'checkpoint',
      'register',
      'order-1',
      '--handoff',
      'opd-round-1',
      '--endpoint',
      server.baseUrl,
      '--model',
      'opd-2',
      '--policy-version',
      '3',
    );
    expect([wrongVersion.code, wrongVersion.stderr]).toEqual([
      2,
      expect.stringContaining(
        '[WRONG_CHECKPOINT] --policy-version 3: handoff opd-round-1 of run order-1 asks for policy version 2',
      ),
    ]);
    expect(
      (
        await hat(
          'checkpoint',
          'register',
          'order-1',
          '--handoff',
          'opd-round-1',
          '--endpoint',
          server.baseUrl,
          '--model',
          'opd-2',
        )
      ).code,
    ).toBe(0);

    await waitingAt('order-1', 'opd');
    const round2 = await episodes('rollouts-round-2');
    expect(new Set(round2.map((record) => record.policy_version))).toEqual(new Set([2]));
    expect(new Set(server.chatRequests.slice(-round2.length).map((entry) => entry.body.model))).toEqual(
      new Set(['opd-2']),
    );
    expect(
      (
        await hat(
          'checkpoint',
          'register',
          'order-1',
          '--handoff',
          'opd',
          '--endpoint',
          server.baseUrl,
          '--model',
          'opd-3',
        )
      ).code,
    ).toBe(0);

    const done: RunStatus = await waitFor(async () => {
      const current = await status('order-1');
      return current.state === 'completed' || current.state === 'failed' ? current : undefined;
    }, 60_000);
    expect([done.state, done.error]).toEqual(['completed', undefined]);
    // The first stage ran once: the run resumed where it was, it did not start over.
    expect((await kit.context.queue('fanout-demo').getJob(done.stages[0]?.jobId ?? ''))?.finishedOn).toBe(
      dataFinishedOn,
    );
    // One stage job per round, under the ids planned with the run.
    expect((await rlJobs()).map((job) => job.id).sort()).toEqual([done.stages[1]?.jobId, done.stages[2]?.jobId].sort());
    const served = await kit.context.queue('noop').getJob(done.stages[3]?.jobId ?? '');
    expect(served?.returnvalue.output).toMatchObject({ label: 'on opd-3 v3' });

    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/order-1/run-manifest.json')).toString()),
    );
    expect(
      manifest.stages.map((stage) => [stage.name, stage.status, stage.handoff ?? null, stage.policyVersion ?? null]),
    ).toEqual([
      ['data', 'completed', null, null],
      ['rollouts-round-1', 'completed', 'sft', 1],
      ['rollouts-round-2', 'completed', 'opd-round-1', 2],
      ['served', 'completed', 'opd', null],
    ]);
    expect(
      manifest.handoffs?.map((handoff) => [
        handoff.name,
        handoff.status,
        handoff.checkpoint?.model,
        handoff.checkpoint?.policyVersion ?? null,
      ]),
    ).toEqual([
      ['sft', 'completed', 'sft-1', null],
      ['opd-round-1', 'completed', 'opd-2', 2],
      ['opd', 'completed', 'opd-3', 3],
    ]);
    const report = (await kit.store.getBuffer('runs/order-1/run-report.html')).toString();
    expect(report).toContain('<h2>Order of the run</h2>');
    expect(report.indexOf('<b>handoff sft</b>')).toBeLessThan(report.indexOf('rollouts-round-1 (rl), policy v1'));
    expect(report.indexOf('rollouts-round-1 (rl), policy v1')).toBeLessThan(
      report.indexOf('<b>handoff opd-round-1</b>'),
    );
    expect(report.indexOf('<b>handoff opd-round-1</b>')).toBeLessThan(
      report.indexOf('rollouts-round-2 (rl), policy v2'),
    );
    expect(report).toContain('checkpoint opd-2 at');
  }, 180_000);
  it('with maxStaleness 1 starts round 2 on the SFT checkpoint before version 2 arrives, and its handoff counts what it drops', async () => {
    const config = join(directory, 'stale.yaml');
    await writeFile(
      config,
      [
        'runId: order-1',
        'handoffs:',
        '  sft: { after: [data], pollSeconds: 1 }',
        '  opd: { after: [rollouts], pollSeconds: 1 }',
        'stages:',
        '  data: { stage: fanout-demo, parts: 1 }',
        '  rollouts:',
        '    stage: rl',
        '    rounds: 2',
        '    maxStaleness: 1',
        '    generate: { count: 2, seed: 7 }',
        '    groups: 2',
        '    groupSize: 2',
        '    groupsPerPart: 2',
        '    maxTurns: 1',
        '    policy: { adapter: openai, baseUrl: "${checkpoints.sft.endpoint}", model: "${checkpoints.sft.model}", maxRetries: 0 }',
        '  served: { stage: noop, label: "on ${checkpoints.opd.model} v${checkpoints.opd.policyVersion}" }',
        '',
      ].join('\n'),
    );
    const tooStale = join(directory, 'too-stale.yaml');
    await writeFile(tooStale, (await readFile(config, 'utf8')).replace('maxStaleness: 1', 'maxStaleness: 2'));
    const refused = await hat('run', tooStale);
    expect([refused.code, refused.stderr]).toEqual([
      2,
      expect.stringMatching(/stages\.rollouts\.maxStaleness: must be a whole number from 0 to rounds - 1 \(1 here\)/),
    ]);
    startWorker();
    const requestsBefore = server.chatRequests.length;
    const run = await hat('run', config);
    expect([run.code, run.stderr]).toEqual([0, '']);
    const atSft = await waitingAt('order-1', 'sft');
    expect(atSft.stages.map((stage) => [stage.name, stage.handoff ?? null, stage.policyVersion ?? null])).toEqual([
      ['data', null, null],
      ['rollouts-round-1', 'sft', 1],
      ['rollouts-round-2', 'sft', 1],
      ['served', 'opd', null],
    ]);
    expect(await rlJobs()).toEqual([]);
    expect(
      (
        await hat(
          'checkpoint',
          'register',
          'order-1',
          '--handoff',
          'sft',
          '--endpoint',
          server.baseUrl,
          '--model',
          'sft-1',
        )
      ).code,
    ).toBe(0);

    // Both rounds sample version 1 while the trainer has not returned version 2 yet.
    await waitingAt('order-1', 'opd-round-1');
    const bothDone = await waitFor(async () => {
      const current = await status('order-1');
      if (current.state === 'failed') throw new Error(JSON.stringify(current, null, 1));
      return current.stages
        .filter((stage) => stage.name.startsWith('rollouts-round-'))
        .every((stage) => stage.state === 'completed')
        ? current
        : undefined;
    }, 60_000);
    expect(
      bothDone.handoffs?.filter((handoff) => handoff.name !== 'sft').map((handoff) => [handoff.name, handoff.state]),
    ).toEqual([
      ['opd-round-1', 'waiting-for-checkpoint'],
      ['opd', 'waiting-for-stages'],
    ]);
    expect(await kit.store.head('runs/order-1/handoffs/opd-round-1/checkpoint.json')).toBeUndefined();
    const round2 = await episodes('rollouts-round-2');
    expect(round2.length).toBe(4);
    expect(new Set(round2.map((record) => record.policy_version))).toEqual(new Set([1]));
    expect(new Set(server.chatRequests.slice(requestsBefore).map((entry) => entry.body.model))).toEqual(
      new Set(['sft-1']),
    );

    // Version 2 arrives; handoff opd (version 3, trained from v2) takes round 2's v1 records: 2 - 1 = 1 is within the bound.
    expect(
      (
        await hat(
          'checkpoint',
          'register',
          'order-1',
          '--handoff',
          'opd-round-1',
          '--endpoint',
          server.baseUrl,
          '--model',
          'opd-2',
        )
      ).code,
    ).toBe(0);
    await waitingAt('order-1', 'opd');
    const request = JSON.parse(
      (await kit.store.getBuffer('runs/order-1/handoffs/opd/request.json')).toString(),
    ) as TrainingRequest;
    expect(request).toMatchObject({
      handoff: 'opd',
      policyVersion: 3,
      maxStaleness: 1,
      dropped: [],
      datasets: [{ stage: 'rollouts-round-2', policyVersion: 1 }],
    });
    expect(
      (
        await hat(
          'checkpoint',
          'register',
          'order-1',
          '--handoff',
          'opd',
          '--endpoint',
          server.baseUrl,
          '--model',
          'opd-3',
        )
      ).code,
    ).toBe(0);
    const done: RunStatus = await waitFor(async () => {
      const current = await status('order-1');
      return current.state === 'completed' || current.state === 'failed' ? current : undefined;
    }, 60_000);
    expect([done.state, done.error]).toEqual(['completed', undefined]);
    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/order-1/run-manifest.json')).toString()),
    );
    expect(
      manifest.handoffs?.map((handoff) => [
        handoff.name,
        handoff.checkpoint?.policyVersion ?? null,
        handoff.dropped ?? null,
      ]),
    ).toEqual([
      ['sft', null, null],
      ['opd-round-1', 2, []],
      ['opd', 3, []],
    ]);
    const report = (await kit.store.getBuffer('runs/order-1/run-report.html')).toString();
    expect(report).toContain('rollouts-round-2 (rl), policy v1');
    expect(report).toContain('stale records dropped: 0');
  }, 180_000);
});
