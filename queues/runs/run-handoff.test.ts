import { join } from 'node:path';
import type { FlowJob } from 'bullmq';
import { ValidationError } from '../../shared/errors';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { buildRunFlow } from './flows';
import { planRun, readConfigFile } from './run-config';
import { checkpointPlaceholders, fillCheckpointReferences, type HandoffJobData } from './run-handoff';

describe('runs with a trainer handoff', () => {
  beforeAll(() => registerCatalogStages());
  const env = { HAT_ARTIFACTS: 's3://bucket/hat' };
  const now = new Date('2025-01-31T02:00:00Z');
  const replayTarget = { adapter: 'openai', baseUrl: '${checkpoint.endpoint}', model: '${checkpoint.model}' };
  const config = {
    runId: 'h1',
    handoff: {
      after: ['fanout-demo'],
      before: ['replay', 'noop'],
      timeoutMinutes: 30,
      hyperparameters: { learningRate: 1e-5 },
    },
    stages: {
      'fanout-demo': { parts: 2 },
      'hash-demo': { parts: 1 },
      replay: { inputs: ['${stages.fanout-demo.manifestUri}'], target: replayTarget },
      noop: { label: 'after ${checkpoint.model}', inputs: ['${stages.replay.manifestUri}'] },
    },
  };

  const problemsOf = (value: unknown): string[] => {
    try {
      planRun(value, { env, now, file: 'run.yaml' });
    } catch (error) {
      if (error instanceof ValidationError)
        return error.problems.map((problem) => `${problem.path}: ${problem.message}`);
      throw error;
    }
    return [];
  };

  it('validates held-back stages with placeholders and keeps their configs with ${checkpoint.*} for the handoff', () => {
    const plan = planRun(config, { env, now });
    expect(plan.handoffs).toEqual([
      {
        name: 'train',
        jobId: 'h1.train.handoff',
        after: ['fanout-demo'],
        before: ['replay', 'noop'],
        timeoutMs: 1_800_000,
        pollIntervalMs: 60_000,
        hyperparameters: { learningRate: 1e-5 },
        order: 0,
      },
    ]);
    const trainTarget = {
      adapter: 'openai',
      baseUrl: '${checkpoints.train.endpoint}',
      model: '${checkpoints.train.model}',
    };
    const replay = plan.stages.find((stage) => stage.name === 'replay');
    expect(replay).toMatchObject({
      afterHandoff: true,
      input: { target: { baseUrl: checkpointPlaceholders.endpoint, model: checkpointPlaceholders.model } },
      template: { inputs: ['s3://bucket/hat/runs/h1/fanout-demo/manifest.json'], target: trainTarget },
    });
    expect(
      fillCheckpointReferences(replay?.template, 'train', { endpoint: 'http://serve:8000/v1', model: 'ckpt-7' }),
    ).toMatchObject({ target: { baseUrl: 'http://serve:8000/v1', model: 'ckpt-7' } });
    expect(plan.stages.find((stage) => stage.name === 'fanout-demo')?.afterHandoff).toBeUndefined();
  });

  it('builds run -> {handoff -> after stages, independent stages}; held-back stages wait in the handoff job data', () => {
    const plan = planRun(config, { env, now });
    const flow = buildRunFlow(plan, { jobDataLimit: 64 * 1024 });
    expect(flow.data).toMatchObject({
      handoffs: [{ name: 'train', jobId: 'h1.train.handoff', after: ['fanout-demo'], before: ['replay', 'noop'] }],
      stages: [
        { name: 'fanout-demo' },
        { name: 'hash-demo' },
        { name: 'replay', afterHandoff: true },
        { name: 'noop', afterHandoff: true },
      ],
    });
    const children = flow.children as FlowJob[];
    expect(children.map((child) => [child.queueName, child.name, child.opts?.ignoreDependencyOnFailure])).toEqual([
      ['hash-demo', 'stage', true],
      ['runs', 'handoff', true],
    ]);
    const handoff = children[1];
    expect(handoff.opts?.jobId).toBe('h1.train.handoff');
    expect((handoff.children as FlowJob[]).map((child) => [child.queueName, child.opts?.failParentOnFailure])).toEqual([
      ['fanout-demo', true],
    ]);
    const data = handoff.data as HandoffJobData;
    expect(data).toMatchObject({
      step: 'wait-stages',
      upstream: ['fanout-demo'],
      timeoutMs: 1_800_000,
      pollIntervalMs: 60_000,
    });
    expect(data.post.map((stage) => [stage.name, stage.jobId, stage.dependsOn])).toEqual([
      ['replay', plan.stages[2]?.jobId, []],
      ['noop', plan.stages[3]?.jobId, ['replay']],
    ]);
  });

  it('makes a stage that references the checkpoint wait for it, and refuses reads across the handoff the wrong way', () => {
    const implicit = planRun(
      {
        ...config,
        stages: { ...config.stages, noop: { label: '${checkpoint.endpoint}' } },
        handoff: { after: ['fanout-demo'], before: ['replay'] },
      },
      { env, now },
    );
    expect(implicit.stages.find((stage) => stage.name === 'noop')).toMatchObject({
      afterHandoff: true,
      segment: 'train',
    });
    expect(problemsOf({ runId: 'x', stages: { noop: { label: '${checkpoint.model}' } } })).toEqual([
      expect.stringMatching(/needs a trainer handoff/),
    ]);
    // hash-demo is not awaited by the handoff, yet replay (held back) would read it.
    expect(
      problemsOf({
        ...config,
        stages: { ...config.stages, replay: { inputs: ['${stages.hash-demo.manifestUri}'], target: replayTarget } },
      }),
    ).toEqual([
      expect.stringMatching(
        /^stages\.replay: reads stage "hash-demo", which handoff train does not wait for; add "hash-demo" to handoff\.after/,
      ),
    ]);
    expect(
      problemsOf({ ...config, handoff: { after: ['fanout-demo', 'nope'], before: ['fanout-demo', 'replay'] } }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^handoff\.after\[1\]: stage "nope" is not in this run/),
        expect.stringMatching(/^handoff\.before\[0\]: stage "fanout-demo" is in both/),
      ]),
    );
  });

  it("trains side-by-side lineages (an experiment's arms) in one run: follows orders them, base: none starts one from scratch", () => {
    const arms = {
      runId: 'arms',
      'x-shared': { note: 'anchors live here and are not part of the run' },
      handoffs: {
        first: { after: ['fanout-demo'] },
        second: { follows: 'first', after: ['hash-demo'], base: 'none' },
      },
      stages: {
        'fanout-demo': { parts: 1 },
        'hash-demo': { parts: 1 },
        noop: { label: '${checkpoints.first.model} ${checkpoints.second.model}' },
      },
    };
    const plan = planRun(arms, { env, now });
    expect(plan.handoffs.map((handoff) => [handoff.name, handoff.order, handoff.follows, handoff.baseFrom])).toEqual([
      ['first', 0, undefined, undefined],
      ['second', 1, 'first', 'none'],
    ]);
    const first = (buildRunFlow(plan, { jobDataLimit: 64 * 1024 }).children as FlowJob[]).find(
      (child) => child.name === 'handoff',
    ) as FlowJob;
    // The second handoff's stage ran before the first checkpoint: it is polled for, not re-added.
    const next = (first.data as HandoffJobData).next as HandoffJobData;
    expect(next.name).toBe('second');
    expect(next.baseFrom).toBe('none');
    expect(next.awaits).toEqual([
      { name: 'hash-demo', queue: 'hash-demo', jobId: plan.stages.find((stage) => stage.name === 'hash-demo')?.jobId },
    ]);
    // Without follows the two lineages do not wait for each other: refused, as before.
    expect(
      problemsOf({ ...arms, handoffs: { first: { after: ['fanout-demo'] }, second: { after: ['hash-demo'] } } }),
    ).toEqual([
      expect.stringMatching(/^handoffs\.second\.after: handoffs "first" and "second" do not wait for each other/),
    ]);
    expect(
      problemsOf({
        ...arms,
        handoffs: {
          first: { after: ['fanout-demo'], base: 'second' },
          second: { follows: 'nobody', after: ['hash-demo'] },
        },
      }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^handoffs\.second\.follows: no handoff named "nobody"/),
        expect.stringMatching(
          /^handoffs\.first\.base: training continues from "second", which is not a handoff before first/,
        ),
      ]),
    );
  });

  it('refuses configs that would write outside the run prefix', () => {
    expect(
      problemsOf({
        runId: 'x',
        stages: {
          'fanout-demo': { parts: 1, out: '/etc' },
          noop: { inputs: ['s3://bucket/hat/runs/x/../../secrets/manifest.json'] },
        },
      }),
    ).toEqual([
      expect.stringMatching(/^stages\.fanout-demo\.out: a run decides where stages write/),
      expect.stringMatching(/^stages\.noop\.inputs\[0\]: ".*" has a "\." or "\.\." segment/),
    ]);
    expect(problemsOf({ runId: 'x', artifacts: 'file:///data/../etc', stages: { noop: {} } })).toEqual([
      expect.stringMatching(/^artifacts: .* has a "\." or "\.\." segment/),
    ]);
  });
});

describe('examples/nightly.yaml', () => {
  beforeAll(() => registerCatalogStages());

  it("plans the method's order: shard, SFT handoff, two distill rounds with a handoff between, OPD handoff, rl, RL handoff, replay", async () => {
    const source = await readConfigFile(join(__dirname, '..', '..', 'examples', 'nightly.yaml'));
    const plan = planRun(source.value, {
      env: { HAT_ARTIFACTS: 's3://hat/runs-root' },
      now: new Date('2025-01-30T18:00:00Z'),
      runId: 'nightly-20250130T180000Z',
      file: source.file,
      locator: source.locator,
    });
    expect(plan.handoffs.map((handoff) => [handoff.name, handoff.after, handoff.policyVersion, handoff.order])).toEqual(
      [
        ['sft', ['sft_data'], undefined, 0],
        ['opd-round-1', ['opd-round-1'], 2, 1],
        ['opd', ['opd-round-2'], 3, 2],
        ['rl', ['rl'], undefined, 3],
      ],
    );
    expect(plan.handoffs[0]?.timeoutMs).toBe(480 * 60_000);
    expect(
      plan.stages.map((stage) => [stage.name, stage.kind, stage.segment ?? null, stage.round?.policyVersion ?? null]),
    ).toEqual([
      ['collect', 'collect', null, null],
      ['augment', 'augment', null, null],
      ['sft_data', 'shard', null, null],
      ['opd-round-1', 'distill', 'sft', 1],
      ['opd-round-2', 'distill', 'opd-round-1', 2],
      ['rl', 'rl', 'opd', null],
      ['eval', 'eval', 'rl', null],
      ['gate', 'gate', 'rl', null],
      ['replay', 'replay', 'rl', null],
    ]);
    expect(plan.stages.find((stage) => stage.name === 'replay')?.dependsOn).toEqual(['collect', 'gate']);
    expect(plan.handoffs.find((handoff) => handoff.name === 'rl')?.before).toEqual(
      expect.arrayContaining(['eval', 'gate', 'replay']),
    );
    expect(plan.stages.find((stage) => stage.name === 'opd-round-2')?.template).toMatchObject({
      student: { modelDir: '${checkpoints.opd-round-1.modelDir}' },
      policyVersion: 2,
    });
    // Unresolved `latest` inputs plan with placeholders (as `hat schedule set` validates them).
    expect(plan.stages[0]?.input).toMatchObject({
      tasks: ['s3://hat/tasks/imported/dt=YYYY-MM-DD/tasks.jsonl.gz'],
      harness: 's3://hat/harness/live-host/CURRENT-VERSION',
    });
    expect(plan.stages.find((stage) => stage.name === 'rl')?.template).toMatchObject({
      policy: { baseUrl: '${checkpoints.opd.endpoint}', model: '${checkpoints.opd.model}' },
    });
  });
});

describe('examples/demo-run.yaml', () => {
  beforeAll(() => registerCatalogStages());

  // `hat demo` runs the method's order, its simulated trainer answering each handoff.
  it('plans SFT -> OPD in two rounds -> RL, each on-policy stage sampling the checkpoint before it', async () => {
    const source = await readConfigFile(join(__dirname, '..', '..', 'examples', 'demo-run.yaml'));
    const plan = planRun(source.value, {
      env: { HAT_ARTIFACTS: 'file:///tmp/demo' },
      now: new Date('2025-01-30T18:00:00Z'),
      file: source.file,
      locator: source.locator,
    });
    expect(plan.handoffs.map((handoff) => [handoff.name, handoff.after, handoff.policyVersion ?? null])).toEqual([
      ['sft', ['shard'], null],
      ['opd-round-1', ['distill-round-1'], 2],
      ['opd', ['distill-round-2'], 3],
      ['rl', ['rl'], null],
    ]);
    expect(plan.stages.map((stage) => [stage.name, stage.segment ?? null, stage.round?.policyVersion ?? null])).toEqual(
      [
        ['collect', null, null],
        ['augment', null, null],
        ['shard', null, null],
        ['distill-round-1', 'sft', 1],
        ['distill-round-2', 'opd-round-1', 2],
        ['rl', 'opd', null],
        ['replay', null, null],
        // eval ranks every trained checkpoint, so it waits for the last handoff.
        ['eval', 'rl', null],
      ],
    );
    expect(plan.stages.find((stage) => stage.name === 'rl')?.template).toMatchObject({
      policy: { baseUrl: '${checkpoints.opd.endpoint}', model: '${checkpoints.opd.model}' },
      policyVersion: '${checkpoints.opd.policyVersion}',
    });
    // The rl stage's policy version is a number once the OPD checkpoint (v3) fills it in.
    expect(
      fillCheckpointReferences(
        { policyVersion: '${checkpoints.opd.policyVersion}', label: 'v${checkpoints.opd.policyVersion}' },
        'opd',
        { policyVersion: '3' },
      ),
    ).toEqual({ policyVersion: 3, label: 'v3' });
  });
});

describe('examples/hat-effect.yaml', () => {
  beforeAll(() => registerCatalogStages());

  it('plans four arms over three seeds as one chain: A and B from scratch, the teacher from b1, C from B, D from C', async () => {
    const source = await readConfigFile(join(__dirname, '..', '..', 'examples', 'hat-effect.yaml'));
    const plan = planRun(source.value, {
      env: { HAT_ARTIFACTS: 's3://hat/runs-root' },
      now: new Date('2025-01-30T18:00:00Z'),
      runId: 'hat-effect-test',
      file: source.file,
      locator: source.locator,
    });
    expect(plan.handoffs.map((handoff) => [handoff.name, handoff.after, handoff.baseFrom ?? 'previous'])).toEqual([
      ['a1', ['shard_fixed'], 'none'],
      ['b1', ['shard_hsa'], 'none'],
      ['teacher', ['shard_hsa'], 'b1'],
      ['c1', ['opd_1'], 'b1'],
      ['d1', ['rl_1'], 'previous'],
      ['a2', ['shard_fixed'], 'none'],
      ['b2', ['shard_hsa'], 'none'],
      ['c2', ['opd_2'], 'previous'],
      ['d2', ['rl_2'], 'previous'],
      ['a3', ['shard_fixed'], 'none'],
      ['b3', ['shard_hsa'], 'none'],
      ['c3', ['opd_3'], 'previous'],
      ['d3', ['rl_3'], 'previous'],
    ]);
    // A and B get the same trainer settings (model, steps, tokens per step) for each seed.
    for (const seed of ['1', '2', '3'])
      expect(plan.handoffs.find((handoff) => handoff.name === `a${seed}`)?.trainer).toEqual(
        plan.handoffs.find((handoff) => handoff.name === `b${seed}`)?.trainer,
      );
    const evalStage = plan.stages.find((stage) => stage.name === 'eval');
    expect(evalStage?.segment).toBe('d3');
    expect((evalStage?.input as { experiment: { arms: Array<{ models: string[] }> } }).experiment.arms).toHaveLength(4);
  });
});
