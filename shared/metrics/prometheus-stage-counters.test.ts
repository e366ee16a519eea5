import { z } from 'zod';
import { countersFromStats, countersOf, declaresCounters } from './prometheus-stage-counters';
import { errorCodeOf } from './prometheus-worker-metrics';

describe('stage counters', () => {
  it('reads the numeric fields of an output `counters` object and nothing else', () => {
    expect(
      countersOf({
        manifestUri: 's3://b/m.json',
        counters: { trajectories: 12, tokens: 3.5e6, label: 'x', negative: -1, 'bad name!': 3, infinite: Infinity },
      }),
    ).toEqual({ trajectories: 12, tokens: 3.5e6 });
    expect(countersOf({ trajectories: 12 })).toBeUndefined();
    expect(countersOf({ counters: [1, 2] })).toBeUndefined();
    expect(countersOf(undefined)).toBeUndefined();
    expect(countersOf({ counters: {} })).toEqual({});
  });

  it('takes counts from manifest stats, leaving out versions, durations, rates, means and percentiles', () => {
    const replayStats = {
      verdict: 'pass',
      sessions: 40,
      calls: 310,
      callsFailed: 2,
      unreplayable: 0,
      sessionE2eP50Ms: 812,
      sessionE2eP95Ms: 1430,
    };
    expect(countersFromStats(replayStats)).toEqual({ sessions: 40, calls: 310, callsFailed: 2, unreplayable: 0 });
    expect(
      countersFromStats({
        schemaVersion: 1,
        tasks: 10,
        acceptanceRate: 1,
        meanAcceptedReward: 1,
        elapsedMs: 5000,
        fraction: 0.5,
        nested: { episodes: 4 },
      }),
    ).toEqual({ tasks: 10 });
    expect(countersFromStats(null)).toEqual({});
  });

  it('knows a stage whose part outputs declare counters', () => {
    expect(declaresCounters(z.object({ key: z.string(), counters: z.record(z.string(), z.number()) }))).toBe(true);
    expect(declaresCounters(z.object({ key: z.string() }).strict())).toBe(false);
    expect(declaresCounters(z.string())).toBe(false);
  });

  it('labels failures with the [CODE] their message starts with', () => {
    expect(errorCodeOf('[TEACHER_UNAVAILABLE] collect part-00000: ...')).toBe('TEACHER_UNAVAILABLE');
    expect(errorCodeOf('job stalled more than allowable limit')).toBe('UNKNOWN');
    expect(errorCodeOf('see [NOT_AT_START]')).toBe('UNKNOWN');
    expect(errorCodeOf(undefined)).toBe('UNKNOWN');
  });
});
