import { runOrderGroups, runOrderHtml } from './run-order-html';
import type { HandoffOutcome, StageOutcome } from './run-manifest';

describe('the run in the method order (run report)', () => {
  const stage = (name: string, extra: Partial<StageOutcome> = {}): StageOutcome => ({
    name,
    status: 'completed',
    jobId: `j.${name}`,
    parts: 1,
    dependsOn: [],
    startedAt: '2025-01-31T02:00:00.000Z',
    finishedAt: '2025-01-31T02:01:00.000Z',
    ...extra,
  });
  const handoff = (name: string, extra: Partial<HandoffOutcome> = {}): HandoffOutcome => ({
    name,
    status: 'completed',
    jobId: `j.${name}.handoff`,
    after: [],
    before: [],
    requestedAt: '2025-01-31T02:01:00.000Z',
    checkpointAt: '2025-01-31T02:05:00.000Z',
    ...extra,
  });
  const report = {
    stages: [
      stage('sft_data', { kind: 'shard' }),
      stage('opd-round-1', { kind: 'distill', handoff: 'sft', policyVersion: 1 }),
      stage('opd-round-2', { kind: 'distill', handoff: 'opd-round-1', policyVersion: 2 }),
      stage('rl', { handoff: 'opd', status: 'failed', error: '[X] broke' }),
    ],
    handoffs: [
      handoff('sft', {
        after: ['sft_data'],
        checkpoint: { modelDir: '/m/sft', simulated: true, registeredBy: 'simulated-trainer' },
      }),
      handoff('opd-round-1', {
        after: ['opd-round-1'],
        policyVersion: 2,
        checkpoint: { endpoint: 'http://s:8000/v1', model: 'opd-2', policyVersion: 2 },
      }),
      handoff('opd', {
        after: ['opd-round-2'],
        policyVersion: 3,
        status: 'failed',
        error: '[CHECKPOINT_TIMEOUT] late',
      }),
    ],
  };

  it('groups stages after the handoff whose checkpoint they ran on, in chain order', () => {
    expect(
      runOrderGroups(report).map((group) => [group.handoff?.name ?? null, group.stages.map((item) => item.name)]),
    ).toEqual([
      [null, ['sft_data']],
      ['sft', ['opd-round-1']],
      ['opd-round-1', ['opd-round-2']],
      ['opd', ['rl']],
    ]);
  });

  it('lists stages, handoffs, checkpoints and policy versions in order, flags simulated training, and draws the timeline', () => {
    const html = runOrderHtml(report);
    const order = [
      'sft_data (shard): completed',
      '<b>handoff sft</b>',
      'opd-round-1 (distill), policy v1',
      '<b>handoff opd-round-1</b>',
      'opd-round-2 (distill), policy v2',
      '<b>handoff opd</b>',
      'rl: failed',
    ];
    const positions = order.map((text) => html.indexOf(text));
    expect(positions.every((position) => position >= 0)).toBe(true);
    expect([...positions].sort((left, right) => left - right)).toEqual(positions);
    expect(html).toContain('SIMULATED TRAINING (no training happened): checkpoint /m/sft');
    expect(html).toContain('<b>Simulated training:</b>');
    expect(html).toContain('checkpoint opd-2 at http://s:8000/v1, policy v2');
    expect(html).toContain('[CHECKPOINT_TIMEOUT] late');
    expect(html).toMatch(/<svg[^>]*aria-label="run timeline">.*handoff sft \(waiting for the trainer\)/);
  });

  it('shows what a real trainer did: objective, steps, loss, the proofs, and the loss curve through every point', () => {
    const trained = handoff('rl', {
      after: ['rl'],
      checkpoint: {
        modelDir: '/m/rl/onnx',
        simulated: false,
        registeredBy: 'hat-trainer',
        training: {
          objective: 'rl',
          steps: 3,
          finalLoss: 0.25,
          tokensPerSecond: 1800,
          titoMaxAbsDiff: 9.5e-7,
          onnxMaxAbsLogitDiff: 2e-6,
          advantages: { records: 4, nonZero: 2 },
          lossCurve: [
            { step: 1, loss: 1 },
            { step: 2, loss: 0.5 },
            { step: 3, loss: 0.25 },
          ],
        },
      },
    });
    const html = runOrderHtml({ stages: [stage('rl')], handoffs: [trained] });
    expect(html).toContain(
      'trained: rl, 3 steps, final loss 0.2500, 1800 tokens/s, token-in-token-out max |log-prob diff| 9.50e-7, 2 of 4 records with a non-zero advantage, ONNX vs PyTorch max |logit diff| 2.00e-6',
    );
    expect(html).not.toContain('Simulated training');
    // Highest loss at the top of the plot (y = 8), lowest at the bottom (y = 98), steps left to right.
    expect(html).toContain('points="48.0,8.0 200.0,68.0 352.0,98.0"');
    expect(html).toContain('aria-label="loss curve of handoff rl"');
  });

  it('adds nothing for a run without handoffs', () => {
    expect(runOrderHtml({ stages: [stage('collect')] })).toBe('');
  });
});
