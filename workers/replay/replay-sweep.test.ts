import { renderSweepHtml, stepLoad, summarizeSweep, sweepSchema, type SweepStep } from './replay-sweep';

const step = (index: number, load: number, p50: number, verdict: SweepStep['verdict']): SweepStep => ({
  index,
  load,
  reportUri: `file:///out/step-0${index}/report.json`,
  htmlUri: `file:///out/step-0${index}/report.html`,
  verdict,
  objectives: [
    { metric: 'turn_response_from_intended_ms', percentile: 50, maxMs: 1000, observed: p50, pass: verdict === 'pass' },
  ],
  turnGoodputPerSecond: load * 0.5,
  sessionsPerSecond: load * 0.6,
  latency: { turn_response_from_intended_ms: { p50, p95: p50 * 1.5 } },
  callsFailed: 0,
});

const base = {
  schemaVersion: 1 as const,
  kind: 'hat-replay-sweep' as const,
  runId: 'r',
  createdAt: '2026-01-01T00:00:00Z',
  target: 't',
  loadKind: 'closed' as const,
  ladder: [1, 2, 4, 8, 16],
};

describe('capacity sweep summary', () => {
  it('gives the highest load held below the first break, its goodput, and the knee of a convex latency curve', () => {
    const steps = [
      step(0, 1, 100, 'pass'),
      step(1, 2, 110, 'pass'),
      step(2, 4, 140, 'pass'),
      step(3, 8, 400, 'pass'),
      step(4, 16, 1500, 'fail'),
    ];
    const sweep = summarizeSweep({ ...base, steps }, false);
    expect(sweep.capacity).toEqual({ load: 8, turnGoodputPerSecond: 4, sessionsPerSecond: 4.8 });
    // Farthest below the chord from (1, 100) to (16, 1500), both scaled to [0, 1]: load 8.
    expect(sweep.knee).toEqual({ load: 8, metric: 'turn_response_from_intended_ms' });
    expect(sweep.stoppedBecause).toBe('step 4 (load 16) broke the SLO');
    const html = renderSweepHtml(sweep);
    expect(html).toContain('Highest load holding the SLO: <b>8 concurrent sessions</b>');
    expect(html).toContain('P50 ≤ 1000');
  });

  it('counts no capacity above a break (a pass above a failure is noise) and none when the first step breaks', () => {
    expect(
      summarizeSweep(
        { ...base, steps: [step(0, 1, 100, 'pass'), step(1, 2, 2000, 'fail'), step(2, 4, 900, 'pass')] },
        false,
      ).capacity?.load,
    ).toBe(1);
    const none = summarizeSweep({ ...base, steps: [step(0, 1, 2000, 'fail')] }, true);
    expect(none.capacity).toBeNull();
    expect(none.stoppedBecause).toMatch(/the steps above it were not run/);
  });

  it('sets the ladder value as concurrency or rate, and refuses a ladder that does not ascend', () => {
    expect(stepLoad({ kind: 'closed', concurrency: 1 }, 8)).toEqual({ kind: 'closed', concurrency: 8 });
    expect(stepLoad({ kind: 'open', rate: 1, burstiness: 1, maxConcurrency: 64 }, 2.5)).toEqual({
      kind: 'open',
      rate: 2.5,
      burstiness: 1,
      maxConcurrency: 64,
    });
    expect(sweepSchema.safeParse({ ladder: [4, 2] }).error?.issues[0]?.message).toBe(
      'ladder must be strictly ascending',
    );
  });
});
