import type { FlowJob } from 'bullmq';
import { ValidationError } from '../../shared/errors';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { buildRunFlow } from './flows';
import { planRun } from './run-config';
import type { HandoffJobData } from './run-handoff';
import { staleDatasets } from '../../workers/run/handoff-processor';

describe('stage instances, handoff chains and rounds', () => {
  beforeAll(() => registerCatalogStages());
  const env = { HAT_ARTIFACTS: 's3://bucket/hat' };
  const now = new Date('2025-01-31T02:00:00Z');
  const policy = { adapter: 'openai', baseUrl: '${checkpoints.sft.endpoint}', model: '${checkpoints.sft.model}' };
  const config = {
    runId: 'r1',
    handoffs: { sft: { after: ['data'] }, opd: { after: ['rollouts'] } },
    stages: {
      data: { stage: 'fanout-demo', parts: 2 },
      other: { stage: 'fanout-demo', parts: 1 },
      rollouts: { stage: 'rl', rounds: 3, generate: { count: 2, seed: 1 }, groups: 2, groupSize: 2, policy },
      served: { stage: 'noop', label: '${checkpoints.opd.model}', inputs: ['${stages.rollouts.manifestUri}'] },
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

  it('plans two instances of one kind under their own names, queues and object prefixes', () => {
    const plan = planRun(config, { env, now });
    const [data, other] = plan.stages;
    expect([data?.kind, other?.kind]).toEqual(['fanout-demo', 'fanout-demo']);
    expect([data?.outputPrefix, other?.outputPrefix]).toEqual(['runs/r1/data/', 'runs/r1/other/']);
    expect(data?.jobId).toMatch(/^r1\.data\./);
    const flow = buildRunFlow(plan, { jobDataLimit: 64 * 1024 });
    const children = flow.children as FlowJob[];
    expect(
      children.map((child) => [
        child.queueName,
        child.name,
        (child.data as { stage?: string; kind?: string }).stage,
        (child.data as { kind?: string }).kind,
      ]),
    ).toEqual([
      ['fanout-demo', 'stage', 'other', 'fanout-demo'],
      ['runs', 'handoff', undefined, undefined],
    ]);
  });

  it('unrolls rounds: round k+1 reads the checkpoint trained on round k, records carry version k, later stages read the last round', () => {
    const plan = planRun(config, { env, now });
    expect(
      plan.handoffs.map((handoff) => [handoff.name, handoff.after, handoff.before, handoff.policyVersion ?? null]),
    ).toEqual([
      ['sft', ['data'], ['rollouts-round-1', 'rollouts-round-2', 'rollouts-round-3', 'served'], null],
      ['opd-round-1', ['rollouts-round-1'], ['rollouts-round-2', 'rollouts-round-3', 'served'], 2],
      ['opd-round-2', ['rollouts-round-2'], ['rollouts-round-3', 'served'], 3],
      ['opd', ['rollouts-round-3'], ['served'], 4],
    ]);
    const rounds = plan.stages.filter((stage) => stage.round);
    expect(
      rounds.map((stage) => [
        stage.name,
        stage.segment,
        stage.round?.policyVersion,
        (stage.template as { policy: { model: string } }).policy.model,
      ]),
    ).toEqual([
      ['rollouts-round-1', 'sft', 1, '${checkpoints.sft.model}'],
      ['rollouts-round-2', 'opd-round-1', 2, '${checkpoints.opd-round-1.model}'],
      ['rollouts-round-3', 'opd-round-2', 3, '${checkpoints.opd-round-2.model}'],
    ]);
    expect(rounds.map((stage) => (stage.input as { policyVersion?: number }).policyVersion)).toEqual([1, 2, 3]);
    expect(plan.stages.find((stage) => stage.name === 'served')).toMatchObject({
      segment: 'opd',
      dependsOn: ['rollouts-round-3'],
      template: { inputs: ['s3://bucket/hat/runs/r1/rollouts-round-3/manifest.json'] },
    });
  });

  it('with maxStaleness 1, starts round k+1 on version k-1, makes each round handoff follow the one before and poll for a round started earlier', () => {
    const stale = { ...config, stages: { ...config.stages, rollouts: { ...config.stages.rollouts, maxStaleness: 1 } } };
    const plan = planRun(stale, { env, now });
    const rounds = plan.stages.filter((stage) => stage.round);
    expect(
      rounds.map((stage) => [
        stage.name,
        stage.segment,
        stage.round?.policyVersion,
        (stage.input as { policyVersion?: number }).policyVersion,
      ]),
    ).toEqual([
      ['rollouts-round-1', 'sft', 1, 1],
      ['rollouts-round-2', 'sft', 1, 1],
      ['rollouts-round-3', 'opd-round-1', 2, 2],
    ]);
    expect(
      plan.handoffs.map((handoff) => [
        handoff.name,
        handoff.after,
        handoff.policyVersion ?? null,
        handoff.maxStaleness ?? null,
      ]),
    ).toEqual([
      ['sft', ['data'], null, null],
      ['opd-round-1', ['rollouts-round-1'], 2, 1],
      ['opd-round-2', ['rollouts-round-2'], 3, 1],
      ['opd', ['rollouts-round-3'], 4, 1],
    ]);
    const flow = buildRunFlow(plan, { jobDataLimit: 64 * 1024 });
    const chain: string[] = [];
    for (
      let data: HandoffJobData | undefined = (flow.children as FlowJob[])[1]?.data as HandoffJobData;
      data;
      data = data.next
    ) {
      chain.push(
        `${data.name}: post ${data.post.map((stage) => stage.name).join(', ') || '-'}; polls ${data.awaits.map((stage) => stage.name).join(', ') || '-'}`,
      );
    }
    expect(chain).toEqual([
      'sft: post rollouts-round-1, rollouts-round-2; polls -',
      'opd-round-1: post rollouts-round-3; polls -',
      'opd-round-2: post -; polls rollouts-round-2',
      'opd: post served; polls rollouts-round-3',
    ]);
  });

  it('drops and counts the datasets of a round older than the version trained from minus maxStaleness', () => {
    const dataset = (stage: string, policyVersion: number, records: number) => ({
      stage,
      policyVersion,
      manifestUri: `s3://b/${stage}/manifest.json`,
      objects: [
        { uri: `s3://b/${stage}/e.jsonl.gz`, format: 'jsonl.gz', records, bytes: 1, sha256: 'x' },
        { uri: `s3://b/${stage}/g.jsonl.gz`, kind: 'groups', format: 'jsonl.gz', records: 1, bytes: 1, sha256: 'x' },
      ],
    });
    // Handoff for version 5 trains from version 4: with maxStaleness 1, v3 is kept, v2 is dropped.
    const { kept, dropped } = staleDatasets({ policyVersion: 5, maxStaleness: 1 }, [
      dataset('r-3', 3, 4),
      dataset('r-2', 2, 6),
    ]);
    expect(kept.map((entry) => entry.stage)).toEqual(['r-3']);
    expect(dropped).toEqual([
      {
        stage: 'r-2',
        policyVersion: 2,
        records: 6,
        reason: 'sampled with policy v2, older than v3 (v4 - maxStaleness 1)',
      },
    ]);
    expect(staleDatasets({ policyVersion: 5 }, [dataset('r-2', 2, 6)]).dropped).toEqual([]);
  });

  it('nests each later handoff, with the stages it releases, in the job data of the one before', () => {
    const flow = buildRunFlow(planRun(config, { env, now }), { jobDataLimit: 64 * 1024 });
    const sft = (flow.children as FlowJob[])[1];
    const chain: string[] = [];
    for (let data: HandoffJobData | undefined = sft.data as HandoffJobData; data; data = data.next)
      chain.push(`${data.name}: ${data.post.map((stage) => stage.name).join(', ')}`);
    expect(chain).toEqual([
      'sft: rollouts-round-1',
      'opd-round-1: rollouts-round-2',
      'opd-round-2: rollouts-round-3',
      'opd: served',
    ]);
    expect((sft.opts as { jobId?: string }).jobId).toBe('r1.sft.handoff');
  });

  it('refuses rounds without a handoff or a starting checkpoint, maxStaleness outside 0..rounds-1, unknown kinds and handoffs, and handoffs that do not follow one another', () => {
    const { rollouts } = config.stages;
    expect(
      problemsOf({
        ...config,
        handoffs: { sft: { after: ['data'] } },
        stages: { ...config.stages, served: { stage: 'noop' } },
      }),
    ).toEqual([
      expect.stringMatching(
        /^stages\.rollouts\.rounds: each round hands its samples to the trainer: name "rollouts" in the after list of exactly one handoff \(found 0\)/,
      ),
    ]);
    expect(
      problemsOf({
        ...config,
        stages: { ...config.stages, rollouts: { ...rollouts, policy: { adapter: 'scripted' } } },
      }),
    ).toContainEqual(
      expect.stringMatching(
        /^stages\.rollouts\.rounds: round k\+1 samples from the checkpoint trained on round k, .* it names none/,
      ),
    );
    for (const maxStaleness of [3, -1, 1.5, '1']) {
      expect(problemsOf({ ...config, stages: { ...config.stages, rollouts: { ...rollouts, maxStaleness } } })).toEqual([
        expect.stringMatching(
          /^stages\.rollouts\.maxStaleness: must be a whole number from 0 to rounds - 1 \(2 here\)/,
        ),
      ]);
    }
    expect(
      problemsOf({
        ...config,
        stages: { ...config.stages, rollouts: { ...rollouts, rounds: undefined, maxStaleness: 1 } },
      }),
    ).toContainEqual(expect.stringMatching(/^stages\.rollouts\.maxStaleness: .*\(0 here\)/));
    expect(problemsOf({ ...config, stages: { ...config.stages, other: { stage: 'fanout' } } })).toEqual([
      expect.stringMatching(/^stages\.other\.stage: unknown stage kind "fanout"/),
    ]);
    expect(
      problemsOf({
        ...config,
        stages: { ...config.stages, served: { stage: 'noop', label: '${checkpoints.dpo.model}' } },
      }),
    ).toEqual([
      expect.stringMatching(
        /^stages\.served\.label: \$\{checkpoints\.dpo\.model\} names handoff "dpo", which this run does not have/,
      ),
    ]);
    // Two handoffs after stages that wait for neither: nothing orders them.
    expect(
      problemsOf({
        runId: 'x',
        handoffs: { a: { after: ['data'] }, b: { after: ['other'] } },
        stages: {
          data: { stage: 'fanout-demo' },
          other: { stage: 'fanout-demo' },
          n: { stage: 'noop', label: '${checkpoints.a.model} ${checkpoints.b.model}' },
        },
      }),
    ).toEqual([expect.stringMatching(/^handoffs\.b\.after: handoffs "a" and "b" do not wait for each other/)]);
  });

  it('keeps plain configs as they were: the name is the kind and `rounds` of other kinds is theirs', () => {
    const plan = planRun({ runId: 'p', stages: { 'hash-demo': { parts: 1, rounds: 5 } } }, { env, now });
    expect(plan.stages[0]).toMatchObject({ name: 'hash-demo', kind: 'hash-demo', input: { rounds: 5 } });
    expect(plan.handoffs).toEqual([]);
  });
});
