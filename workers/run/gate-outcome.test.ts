import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { applyGateOutcome } from './gate-outcome';
import type { StageOutcome } from './run-manifest';

describe('gate outcome in the run report', () => {
  it('a hold keeps the night-to-night figure beside the decision', async () => {
    const store = new MemoryArtifactStore();
    await store.put(
      'runs/night-2/gate/decision.json',
      JSON.stringify({
        decision: 'hold',
        candidate: 'new',
        reasons: ['ifeval 60.00 < promoted 70.00'],
        promoted: false,
      }),
    );
    const night = {
      label: 'new vs promoted (stored results)',
      value: 'ifeval -10.0 [-22.5, +0.0]',
      detail: 'paired item by item with run night-1 (new); 4 items passed then and fail now, 0 the reverse',
    };
    const gate: StageOutcome = {
      name: 'gate',
      status: 'completed',
      jobId: 'gate',
      parts: 0,
      dependsOn: ['eval'],
      figures: [
        { label: 'gate decision', value: 'hold new', tone: 'warn', detail: 'ifeval 60.00 < promoted 70.00' },
        night,
      ],
    } as StageOutcome;
    const { stages } = await applyGateOutcome(store, 'night-2', [gate]);
    expect(stages[0].status).toBe('held');
    expect(stages[0].figures).toEqual([
      { label: 'gate decision', value: 'hold new', tone: 'warn', detail: 'ifeval 60.00 < promoted 70.00' },
      night,
    ]);
  });
});
