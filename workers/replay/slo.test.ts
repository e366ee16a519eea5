import { SampleSet } from '../../shared/metrics/sample-set';
import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';
import { evaluateSlo, sloSchema } from './slo';

const session = (index: number, e2eMs: number, status: 'ok' | 'failed' = 'ok'): ReplaySessionRecord => ({
  sessionId: `s${index}`,
  sessionIndex: index,
  part: 0,
  status,
  calls: 2,
  intendedStartMs: 0,
  startMs: 0,
  endMs: e2eMs,
  ...(status === 'ok' ? { e2eMs, e2eFromIntendedMs: e2eMs } : {}),
});

const turn = (index: number, responseMs: number, status: 'ok' | 'failed' = 'ok'): ReplayTurnRecord => ({
  sessionId: `s${index}`,
  sessionIndex: index,
  turnIndex: 0,
  part: 0,
  status,
  calls: 2,
  intendedStartMs: 0,
  startMs: 0,
  ...(status === 'ok' ? { endMs: responseMs, responseMs, responseFromIntendedMs: responseMs } : {}),
});

const call = (index: number, ttftMs: number, tpotMs?: number): ReplayCallRecord => ({
  sessionId: `s${index}`,
  sessionIndex: index,
  callIndex: 0,
  messageIndex: 2,
  part: 0,
  status: 'ok',
  intendedMs: 0,
  dispatchMs: 0,
  endMs: 100,
  scheduleLagMs: 0,
  queueMs: 0,
  retryMs: 0,
  ttftMs,
  ...(tpotMs !== undefined ? { tpotMs } : {}),
  thinkMs: 0,
});

describe('evaluateSlo', () => {
  it('defaults to the viewer turn (P50 <= 3.407 s, P95 <= 8.114 s from the viewer message) and turn goodput within 8.114 s; session goodput still counts', () => {
    const slo = sloSchema.parse({});
    const samples = new SampleSet();
    const turns = [1000, 2000, 3000, 4000, 9000].map((ms, index) => turn(index, ms));
    turns.push(turn(5, 0, 'failed'));
    for (const item of turns)
      if (item.responseFromIntendedMs !== undefined)
        samples.add('turn_response_from_intended_ms', item.responseFromIntendedMs);
    const report = evaluateSlo(slo, samples, { calls: [], turns, sessions: [] }, 2000);
    expect(report.objectives).toEqual([
      { metric: 'turn_response_from_intended_ms', percentile: 50, maxMs: 3407, observed: 3000, pass: true },
      // numpy.percentile gives the same 7999.999999999999.
      {
        metric: 'turn_response_from_intended_ms',
        percentile: 95,
        maxMs: 8114,
        observed: 7999.999999999999,
        pass: true,
      },
    ]);
    expect(report.verdict).toBe('pass');
    expect(report.goodput.turns).toEqual({
      thresholds: { turn_response_from_intended_ms: 8114 },
      good: 4,
      total: 5,
      perSecond: 2,
      share: 4 / 6,
    });
    expect(report.goodput.requests).toBeNull();
    expect(report.goodput.sessions).toBeNull();

    const sessionSlo = sloSchema.parse({
      objectives: [{ metric: 'session_e2e_from_intended_ms', percentile: 50, maxMs: 3407 }],
      goodput: { session_e2e_from_intended_ms: 8114 },
    });
    const sessions = [1000, 9000].map((ms, index) => session(index, ms));
    for (const item of sessions) samples.add('session_e2e_from_intended_ms', item.e2eFromIntendedMs as number);
    const sessionReport = evaluateSlo(sessionSlo, samples, { calls: [], turns, sessions }, 2000);
    expect(sessionReport.objectives[0]).toMatchObject({ observed: 5000, pass: false });
    expect(sessionReport.goodput.sessions).toMatchObject({ good: 1, total: 2 });
  });

  it('fails on any objective missed, says no-data without samples, and counts request goodput as vLLM does (no TPOT counts as met)', () => {
    const slo = sloSchema.parse({
      objectives: [
        { metric: 'ttft_ms', percentile: 99, maxMs: 150 },
        { metric: 'tpot_ms', percentile: 50, maxMs: 20 },
      ],
      goodput: { ttft_ms: 150, tpot_ms: 20 },
    });
    const calls = [call(0, 100, 10), call(1, 120), call(2, 200, 10), call(3, 90, 30)];
    const samples = new SampleSet();
    for (const item of calls) samples.add('ttft_ms', item.ttftMs as number);
    const report = evaluateSlo(slo, samples, { calls, turns: [], sessions: [] }, 1000);
    expect(report.verdict).toBe('fail');
    expect(report.objectives.map((objective) => objective.pass)).toEqual([false, null]);
    expect(report.goodput.requests).toMatchObject({ good: 2, total: 4, perSecond: 2 });
    expect(
      evaluateSlo(
        sloSchema.parse({ objectives: [{ metric: 'tpot_ms', percentile: 50, maxMs: 20 }] }),
        samples,
        { calls, turns: [], sessions: [] },
        1000,
      ).verdict,
    ).toBe('no-data');
  });

  it('refuses goodput on ITL (per chunk, not per request) and unknown metrics, naming them', () => {
    const result = sloSchema.safeParse({ goodput: { itl_ms: 10, ttft: 100 } });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path.join('.'))).toEqual(['goodput.itl_ms', 'goodput.ttft']);
  });
});
