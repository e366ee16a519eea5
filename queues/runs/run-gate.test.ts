import { evaluateGate, parseGateRule } from './run-gate';
import { planRun } from './run-config';
import { registerCatalogStages } from '../../workers/stage-catalog';

registerCatalogStages();

describe('gate rules', () => {
  it('parses absolute and relative rules, and says how to write a bad one', () => {
    expect(parseGateRule('live_stream_qa >= baseline - 0.5')).toMatchObject({
      metric: 'live_stream_qa',
      operator: '>=',
      reference: { kind: 'model', label: 'baseline', offset: -0.5 },
    });
    expect(parseGateRule('ifeval.prompt_strict>base+1')).toMatchObject({
      metric: 'ifeval.prompt_strict',
      operator: '>',
      reference: { kind: 'model', label: 'base', offset: 1 },
    });
    expect(parseGateRule('harness_variant_qa.gap <= 5')).toMatchObject({
      operator: '<=',
      reference: { kind: 'number', value: 5 },
    });
    expect(parseGateRule('live_stream_qa = 90')).toEqual({
      error: expect.stringContaining('e.g. "live_stream_qa >= baseline - 0.5"'),
    });
  });

  const metrics = {
    new: { live_stream_qa: 84, 'ifeval.prompt_strict': 80 },
    promoted: { live_stream_qa: 85, 'ifeval.prompt_strict': 79 },
    base: { live_stream_qa: 80, 'ifeval.prompt_strict': 81 },
  };

  it('holds when a rule fails, with the numbers that failed it', () => {
    const decision = evaluateGate(
      ['live_stream_qa >= promoted - 0.5', 'ifeval.prompt_strict >= base - 1.0'],
      'new',
      metrics,
    );
    expect(decision.decision).toBe('hold');
    expect(decision.reasons).toEqual(['live_stream_qa 84.00 < promoted 85.00 - 0.5 = 84.50']);
    expect(decision.checks.map((check) => check.passed)).toEqual([false, true]);
  });

  it('promotes when every rule holds, and never on a metric or reference it does not have', () => {
    expect(
      evaluateGate(['live_stream_qa >= promoted - 1', 'ifeval.prompt_strict >= base - 1.0'], 'new', metrics).decision,
    ).toBe('promote');
    const missing = evaluateGate(['custom >= 50', 'live_stream_qa >= nightly'], 'new', metrics);
    expect(missing.decision).toBe('hold');
    expect(missing.reasons[0]).toContain('has no such score');
    expect(missing.reasons[1]).toContain('nightly is not an evaluated model');
  });
});

describe('gate: in a run config', () => {
  const env = { HAT_ARTIFACTS: 'file:///tmp/hat-gate-plan' };
  const evalConfig = {
    models: [
      { label: 'new', model: { adapter: 'scripted' } },
      { label: 'base', model: { adapter: 'scripted', policy: 'stochastic' } },
    ],
    suites: { live_stream_qa: { size: 11 } },
  };

  it('plans a gate stage after eval and makes the gated stages wait for it', () => {
    const plan = planRun(
      {
        runId: 'gated',
        stages: { eval: evalConfig, noop: {} },
        gate: { candidate: 'new', rules: ['live_stream_qa >= base'], before: ['noop'] },
      },
      { env, now: new Date('2025-01-01T00:00:00Z') },
    );
    const gate = plan.stages.find((stage) => stage.name === 'gate')!;
    expect(gate.dependsOn).toEqual(['eval']);
    expect(gate.input).toMatchObject({
      scores: 'file:///tmp/hat-gate-plan/runs/gated/eval/manifest.json',
      candidate: 'new',
      pointerRoot: 'file:///tmp/hat-gate-plan',
      holds: ['noop'],
    });
    expect(plan.stages.find((stage) => stage.name === 'noop')!.dependsOn).toEqual(['gate']);
  });

  it('reports bad rules and unknown stages with their paths', () => {
    expect(() =>
      planRun(
        { stages: { eval: evalConfig }, gate: { candidate: 'new', rules: ['live_stream_qa ~ base'] } },
        { env, now: new Date() },
      ),
    ).toThrow(/gate\.rules\[0\]: "live_stream_qa ~ base" is not a gate rule/);
    expect(() =>
      planRun(
        {
          stages: { eval: evalConfig },
          gate: { eval: 'evaluation', candidate: 'new', rules: ['live_stream_qa >= base'], before: ['replay'] },
        },
        { env, now: new Date() },
      ),
    ).toThrow(
      /gate\.eval: stage "evaluation" is not in this run[\s\S]*gate\.before\[0\]: stage "replay" is not in this run/,
    );
  });
});
