import { TRAJECTORY_SCHEMA_VERSION, type Trajectory } from '../../shared/trajectory/trajectory';
import { selectSamples } from './select-samples';

function sample(sampleIndex: number, total: number, status: Trajectory['status'] = 'ok'): Trajectory {
  return {
    schemaVersion: TRAJECTORY_SCHEMA_VERSION,
    id: `traj-${sampleIndex}`,
    taskId: 'task-1',
    category: 'price',
    messages: [{ role: 'system', content: 'host' }],
    tools: [],
    harness: { id: 'h', version: '1', hash: 'x' },
    model: { provider: 'scripted', id: 'expert', sampling: {}, simulated: true },
    calls: [],
    issues: [],
    status,
    ...(status === 'ok' ? {} : { statusReason: `[MODEL_UNAVAILABLE] sample ${sampleIndex} failed` }),
    reward: { total, components: {}, notes: total < 1 ? ['facts: price missing'] : [] },
    sampleIndex,
    meta: {},
  };
}

const outcomes = (decisions: ReturnType<typeof selectSamples>) =>
  decisions.map((decision) => (decision.accepted ? 'accepted' : decision.reason));

describe('selectSamples', () => {
  it('best: keeps the highest reward, the lowest sample index among equals, and names why each other sample lost', () => {
    const decisions = selectSamples(
      [sample(0, 0.9), sample(1, 1), sample(2, 1), sample(3, 0.5), sample(4, 1, 'model_error')],
      { mode: 'best', minReward: 0.8 },
    );
    expect(outcomes(decisions)).toEqual(['not_selected', 'accepted', 'not_selected', 'below_threshold', 'model_error']);
    expect(decisions[0]).toMatchObject({ detail: 'sample 1 scored 1 (this one 0.9)' });
    expect(decisions[3]).toMatchObject({ detail: 'reward 0.5 < minReward 0.8 (facts: price missing)' });
    expect(decisions[4]).toMatchObject({ detail: '[MODEL_UNAVAILABLE] sample 4 failed' });
  });

  it('all: keeps every passing sample; a failed episode never passes, whatever its reward', () => {
    expect(
      outcomes(
        selectSamples([sample(0, 0.9), sample(1, 1, 'step_limit'), sample(2, 0.8), sample(3, 0.79)], {
          mode: 'all',
          minReward: 0.8,
        }),
      ),
    ).toEqual(['accepted', 'step_limit', 'accepted', 'below_threshold']);
    expect(
      outcomes(selectSamples([sample(0, 0.2), sample(1, 1, 'timeout')], { mode: 'best', minReward: 0.8 })),
    ).toEqual(['below_threshold', 'timeout']);
  });
});
