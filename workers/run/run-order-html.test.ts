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

  it('adds nothing for a run without handoffs', () => {
    expect(runOrderHtml({ stages: [stage('collect')] })).toBe('');
  });
});
