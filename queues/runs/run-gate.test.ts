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

describe('gate: significance (paired-bootstrap intervals) and guards', () => {
  const interval = (score: number, low: number, high: number) => ({ score, low, high, items: 40 });
  // Point estimates of the candidate equal to what the comparisons say (candidate − promoted).
  const metricsOf = (ifeval: number, live: number) => ({
    new: { ifeval, 'ifeval.prompt_strict': ifeval, live_stream_qa: live },
    promoted: { ifeval: 70, 'ifeval.prompt_strict': 70, live_stream_qa: 60 },
  });
  const candidates = {
    // −10 on IFEval, interval [−22.5, 0]; significantly better on Live-Stream QA.
    worse: {
      metrics: metricsOf(60, 66),
      comparisons: [
        { a: 'new', b: 'promoted', suite: 'ifeval', difference: interval(-10, -22.5, 0) },
        { a: 'new', b: 'promoted', suite: 'live_stream_qa', difference: interval(6, 2, 10) },
      ],
    },
    // +0.5 on IFEval, interval [−8, +9]; significantly better on Live-Stream QA.
    level: {
      metrics: metricsOf(70.5, 66),
      comparisons: [
        { a: 'new', b: 'promoted', suite: 'ifeval', difference: interval(0.5, -8, 9) },
        // Written the other way round (promoted − new): the gate turns it around.
        { a: 'promoted', b: 'new', suite: 'live_stream_qa', difference: interval(-6, -10, -2) },
      ],
    },
    // +0.5 on both suites, neither interval clear of 0: noise.
    noise: {
      metrics: metricsOf(70.5, 60.5),
      comparisons: [
        { a: 'new', b: 'promoted', suite: 'ifeval', difference: interval(0.5, -8, 9) },
        { a: 'new', b: 'promoted', suite: 'live_stream_qa', difference: interval(0.5, -7, 8) },
      ],
    },
  };
  const nightlyRules = [
    'delta(live_stream_qa, promoted).high > 0',
    'delta(ifeval, promoted).high > 0',
    'delta(live_stream_qa, promoted).low > 0 or delta(ifeval, promoted).low > 0',
  ];
  const clean = { errors: { failed: 0, items: 80 } };

  it('parses delta(...) terms and their interval ends', () => {
    expect(parseGateRule('delta(ifeval, promoted).low > 0')).toMatchObject({
      metric: 'ifeval',
      operator: '>',
      reference: { kind: 'number', value: 0 },
      delta: { label: 'promoted', field: 'low' },
    });
    expect(parseGateRule('delta(live_stream_qa,base) >= -0.5')).toMatchObject({
      delta: { label: 'base', field: 'score' },
      reference: { kind: 'number', value: -0.5 },
    });
    expect(parseGateRule('delta(ifeval, promoted).middle > 0')).toEqual({
      error: expect.stringContaining('delta(<suite>, <label>)[.low|.high] <op> <number>'),
    });
  });

  it('tells −10 [−22.5, 0] from +0.5 [−8, +9], which point-estimate rules with a tolerance do not', () => {
    const decide = (rules: string[], name: keyof typeof candidates) =>
      evaluateGate(rules, 'new', candidates[name].metrics, { comparisons: candidates[name].comparisons, ...clean });
    // A point rule with a tolerance promotes both.
    expect(decide(['ifeval >= promoted - 12'], 'worse').decision).toBe('promote');
    expect(decide(['ifeval >= promoted - 12'], 'level').decision).toBe('promote');
    // Non-inferiority on the interval: the lower end must stay above −20.
    const nonInferior = decide(['delta(ifeval, promoted).low >= -20'], 'worse');
    expect(nonInferior.decision).toBe('hold');
    expect(nonInferior.reasons).toEqual([
      'delta(ifeval, promoted).low -22.50 < -20.00 (new − promoted on ifeval: -10.00 [-22.50, +0.00], 40 items)',
    ]);
    expect(decide(['delta(ifeval, promoted).low >= -20'], 'level').decision).toBe('promote');
    // The nightly rule: not significantly worse anywhere, significantly better somewhere.
    const worse = decide(nightlyRules, 'worse');
    expect(worse.decision).toBe('hold');
    expect(worse.reasons).toEqual([
      'delta(ifeval, promoted).high +0.00 <= 0.00 (new − promoted on ifeval: -10.00 [-22.50, +0.00], 40 items)',
    ]);
    const level = decide(nightlyRules, 'level');
    expect(level.decision).toBe('promote');
    expect(level.checks[2].reason).toBe(
      'delta(live_stream_qa, promoted).low +2.00 > 0.00 (new − promoted on live_stream_qa: +6.00 [+2.00, +10.00], 40 items)',
    );
    // +0.5 everywhere is noise: held by the interval rule, promoted by the old point rule.
    expect(decide(['live_stream_qa >= promoted - 0.5', 'ifeval >= promoted - 0.5'], 'noise').decision).toBe('promote');
    const noise = decide(nightlyRules, 'noise');
    expect(noise.decision).toBe('hold');
    expect(noise.reasons[0]).toMatch(
      /^none of: delta\(live_stream_qa, promoted\)\.low -7\.00 <= 0\.00 .*; delta\(ifeval, promoted\)\.low -8\.00 <= 0\.00/,
    );
  });

  it('holds on a comparison the scores do not have, saying how to get it', () => {
    const decision = evaluateGate(['delta(ifeval, base).low > 0'], 'new', candidates.level.metrics, {
      comparisons: candidates.level.comparisons,
      ...clean,
    });
    expect(decision.reasons).toEqual([
      "delta(ifeval, base).low: the scores have no paired comparison of new and base on ifeval (add [new, base] to the eval's compare)",
    ]);
  });

  it('holds a candidate over maxErrorRate, and one that is not a real model unless allowed', () => {
    const metrics = { new: { ifeval: 90 }, promoted: { ifeval: 80 } };
    const failing = evaluateGate(['ifeval >= promoted'], 'new', metrics, { errors: { failed: 2, items: 20 } });
    expect(failing.decision).toBe('hold');
    expect(failing.reasons).toEqual([
      'error rate of new 10.00% (2 of 20 items failed or timed out) > maxErrorRate 1.00%',
    ]);
    expect(
      evaluateGate(['ifeval >= promoted'], 'new', metrics, { errors: { failed: 2, items: 20 }, maxErrorRate: 0.1 })
        .decision,
    ).toBe('promote');
    const simulated = evaluateGate(['ifeval >= promoted'], 'new', metrics, {
      errors: { failed: 0, items: 20 },
      simulated: 'LOCAL TEST SERVER: scripted answers, not a model',
    });
    expect(simulated.decision).toBe('hold');
    expect(simulated.reasons).toEqual([
      'new is not a real model (LOCAL TEST SERVER: scripted answers, not a model); set allowSimulated: true in the gate config to gate it anyway',
    ]);
    expect(
      evaluateGate(['ifeval >= promoted'], 'new', metrics, {
        errors: { failed: 0, items: 20 },
        simulated: 'random weights',
        allowSimulated: true,
      }).decision,
    ).toBe('promote');
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
