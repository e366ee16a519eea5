import { ValidationError } from '../../shared/errors';
import { registerCatalogStages } from '../../workers/stage-catalog';
import { planRun } from './run-config';

describe('planRun', () => {
  beforeAll(() => registerCatalogStages());
  const env = { HAT_ARTIFACTS: 'file:///data/hat' };
  const now = new Date('2025-01-31T02:00:00.123Z');

  it('derives the run id from the time and config hash, applies stage defaults and places outputs under runs/<id>/<stage>/', () => {
    const plan = planRun({ seed: 7, stages: { 'fanout-demo': { parts: 3 } } }, { env, now });
    expect(plan.runId).toMatch(/^run-20250131T020000Z-[0-9a-f]{8}$/);
    expect(plan.runId.endsWith(plan.configHash.slice(0, 8))).toBe(true);
    expect(plan).toMatchObject({
      artifactsRoot: 'file:///data/hat',
      seed: '7',
      createdAt: now.getTime(),
      source: 'cli',
    });
    expect(plan.stages).toEqual([
      {
        name: 'fanout-demo',
        kind: 'fanout-demo',
        input: { parts: 3, recordsPerPart: 4, partDelayMs: 0, faults: { transientOnFirstAttempt: [], badInput: [] } },
        inputHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        jobId: expect.stringMatching(new RegExp(`^${plan.runId}\\.fanout-demo\\.[0-9a-f]{12}$`)),
        outputPrefix: `runs/${plan.runId}/fanout-demo/`,
        dependsOn: [],
      },
    ]);
    // Same config, same hash and ids; a different config, a different hash.
    const again = planRun({ seed: 7, stages: { 'fanout-demo': { parts: 3 } } }, { env, now });
    expect(again.runId).toBe(plan.runId);
    expect(again.stages[0]?.jobId).toBe(plan.stages[0]?.jobId);
    expect(planRun({ seed: 8, stages: { 'fanout-demo': { parts: 3 } } }, { env, now }).configHash).not.toBe(
      plan.configHash,
    );
  });

  it('resolves references to earlier stages and run fields, and records the dependencies', () => {
    const plan = planRun(
      {
        runId: 'r1',
        artifacts: 's3://bucket/hat/',
        stages: {
          noop: { label: '${run.id}/${run.seed}', inputs: ['${stages.fanout-demo.manifestUri}'] },
          'fanout-demo': {},
        },
      },
      { env: {}, now },
    );
    expect(plan.artifactsRoot).toBe('s3://bucket/hat');
    expect(plan.stages.find((stage) => stage.name === 'noop')).toMatchObject({
      input: { label: 'r1/0', inputs: ['s3://bucket/hat/runs/r1/fanout-demo/manifest.json'] },
      dependsOn: ['fanout-demo'],
    });
  });

  it('reports every problem of the config in one pass, each with its path', () => {
    let caught: unknown;
    try {
      planRun(
        {
          stages: {
            'fanout-demo': { parts: 0, extra: true },
            'no-such-stage': {},
            noop: { inputs: ['${stages.shard.manifestUri}', '${nonsense}'] },
          },
        },
        { env: {}, now, file: 'run.yaml' },
      );
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ValidationError);
    const problems = (caught as ValidationError).problems.map((problem) => `${problem.path}: ${problem.message}`);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^artifacts: no artifact store/),
        expect.stringMatching(
          /^stages\.no-such-stage: unknown stage "no-such-stage"; registered stages: .*fanout-demo/,
        ),
        expect.stringMatching(
          /^stages\.noop\.inputs\[0\]: \$\{stages\.shard\.manifestUri\} refers to stage "shard", which this run does not include/,
        ),
        expect.stringMatching(/^stages\.noop\.inputs\[1\]: unknown reference \$\{nonsense\}/),
        expect.stringMatching(/^stages\.fanout-demo\.parts: /),
        expect.stringMatching(/^stages\.fanout-demo: .*extra/),
      ]),
    );
    expect((caught as ValidationError).exitCode).toBe(2);
    expect((caught as ValidationError).message).toMatch(/^\[BAD_RUN_CONFIG\] run\.yaml has problems/);
  });

  it('refuses stages that reference each other in a cycle, and a stage reading itself', () => {
    expect(() =>
      planRun(
        {
          runId: 'c',
          stages: {
            noop: { inputs: ['${stages.fanout-demo.manifestUri}'] },
            'fanout-demo': { parts: '${stages.noop.outputUri}' },
          },
        },
        { env, now },
      ),
    ).toThrow(
      /stages reference each other in a cycle \((noop -> fanout-demo -> noop|fanout-demo -> noop -> fanout-demo)\)/,
    );
    expect(() =>
      planRun({ runId: 's', stages: { noop: { inputs: ['${stages.noop.manifestUri}'] } } }, { env, now }),
    ).toThrow(/a stage cannot read its own output/);
  });

  it('refuses an empty stage list, unknown top-level keys and bad run ids', () => {
    expect(() => planRun({ stages: {} }, { env, now })).toThrow(/stages: name at least one stage/);
    expect(() => planRun({ stage: { noop: {} } }, { env, now })).toThrow(/stage/);
    expect(() => planRun({ runId: 'a:b', stages: { noop: {} } }, { env, now })).toThrow(/runId: /);
    expect(() => planRun({ runId: '12345', stages: { noop: {} } }, { env, now })).toThrow(/runId: /);
    // A run id is the run job's id: `stalled` or `paused` would be the key of BullMQ's own set or list.
    for (const runId of ['stalled', 'paused', 'active', 'wait'])
      expect(() => planRun({ runId, stages: { noop: {} } }, { env, now })).toThrow(
        /runId: .*not one of BullMQ's key names: wait, active, paused/,
      );
    expect(planRun({ runId: 'stalled-2', stages: { noop: {} } }, { env, now }).runId).toBe('stalled-2');
  });
});
