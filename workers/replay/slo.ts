import { z } from 'zod';
import { percentileOfSorted, sortedSamples } from '../../shared/metrics/percentile';
import type { SampleSet } from '../../shared/metrics/sample-set';
import { callValue, findReplayMetric, replayMetricNames, sessionValue, turnValue } from './replay-metrics';
import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';

const metricName = z.enum(replayMetricNames as [string, ...string[]]);

/** Per-item values goodput can judge (ITL is per chunk, not per request: vLLM refuses it too). */
const goodputMetricNames = replayMetricNames.filter((name) => name !== 'itl_ms');

/**
 * Service-level objectives of a replay.
 * - objectives: "percentile p of metric <= maxMs", each with a verdict.
 * - goodput: per-item thresholds (vLLM's `--goodput`): a call or session is good when it meets
 *   every threshold of its scope; goodput = good items per second of the measured phase.
 * Default: our reading of the report's headline figures (P50 3.407 s, P95 8.114 s in a
 * controlled full-agent replay on one H20 with MTP) as what a viewer waits between asking and
 * hearing the whole answer: the viewer turn's response time, from the viewer's message (the
 * intended send of the turn's first call, so a late client cannot hide a wait) to the last
 * token of the final answer. The report does not spell its metric out; this is an
 * interpretation, not a quote. Goodput counts turns within 8.114 s.
 */
export const defaultSloObjectives = [
  { metric: 'turn_response_from_intended_ms', percentile: 50, maxMs: 3407 },
  { metric: 'turn_response_from_intended_ms', percentile: 95, maxMs: 8114 },
];
export const defaultGoodput = { turn_response_from_intended_ms: 8114 };

export const sloSchema = z
  .object({
    objectives: z
      .array(
        z
          .object({
            metric: metricName,
            /** Percentile in (0, 100]. */
            percentile: z.number().gt(0).max(100),
            /** Largest acceptable value (ms, or tokens for output_tokens). */
            maxMs: z.number().positive(),
          })
          .strict(),
      )
      .default(defaultSloObjectives),
    goodput: z
      .record(z.string(), z.number().positive())
      .superRefine((thresholds, context) => {
        for (const name of Object.keys(thresholds)) {
          if (!goodputMetricNames.includes(name)) {
            context.addIssue({
              code: 'custom',
              path: [name],
              message: `not a per-call or per-session metric; use one of: ${goodputMetricNames.join(', ')}`,
            });
          }
        }
      })
      .default(defaultGoodput),
  })
  .strict();
export type SloConfig = z.infer<typeof sloSchema>;

export interface ObjectiveVerdict {
  metric: string;
  percentile: number;
  maxMs: number;
  /** null when the metric has no samples. */
  observed: number | null;
  pass: boolean | null;
}

export interface GoodputFigure {
  thresholds: Record<string, number>;
  good: number;
  /** Items judged (successful ones; failures are never good). */
  total: number;
  /** Good items per second of the measured phase. */
  perSecond: number;
  /** good / (successful + failed). */
  share: number;
}

export interface SloReport {
  verdict: 'pass' | 'fail' | 'no-data';
  objectives: ObjectiveVerdict[];
  goodput: { requests: GoodputFigure | null; turns?: GoodputFigure | null; sessions: GoodputFigure | null };
}

/** Judges the objectives on the merged samples and counts goodput over the records. */
export function evaluateSlo(
  slo: SloConfig,
  samples: SampleSet,
  records: {
    calls: readonly ReplayCallRecord[];
    turns: readonly ReplayTurnRecord[];
    sessions: readonly ReplaySessionRecord[];
  },
  durationMs: number,
): SloReport {
  const sortedByMetric = new Map<string, Float64Array>();
  const sorted = (metric: string) => {
    let values = sortedByMetric.get(metric);
    if (!values) {
      values = sortedSamples(samples.get(metric));
      sortedByMetric.set(metric, values);
    }
    return values;
  };
  const objectives = slo.objectives.map((objective): ObjectiveVerdict => {
    const values = sorted(objective.metric);
    const observed = values.length > 0 ? percentileOfSorted(values, objective.percentile) : null;
    return { ...objective, observed, pass: observed === null ? null : observed <= objective.maxMs };
  });
  const verdict = objectives.some((objective) => objective.pass === false)
    ? 'fail'
    : objectives.some((objective) => objective.pass === null)
      ? 'no-data'
      : 'pass';
  const callThresholds = thresholdsOf(slo.goodput, 'call');
  const sessionThresholds = thresholdsOf(slo.goodput, 'session');
  const turnThresholds = thresholdsOf(slo.goodput, 'turn');
  return {
    verdict,
    objectives,
    goodput: {
      requests: callThresholds ? goodputOf(records.calls, callThresholds, durationMs, callValue) : null,
      turns: turnThresholds ? goodputOf(records.turns, turnThresholds, durationMs, turnValue) : null,
      sessions: sessionThresholds ? goodputOf(records.sessions, sessionThresholds, durationMs, sessionValue) : null,
    },
  };
}

function thresholdsOf(
  goodput: Record<string, number>,
  scope: 'call' | 'turn' | 'session',
): Record<string, number> | undefined {
  const entries = Object.entries(goodput).filter(([name]) => findReplayMetric(name)?.scope === scope);
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

function goodputOf<T extends { status: 'ok' | 'failed' }>(
  items: readonly T[],
  thresholds: Record<string, number>,
  durationMs: number,
  valueOf: (item: T, metric: string) => number | undefined,
): GoodputFigure {
  let good = 0;
  let total = 0;
  for (const item of items) {
    if (item.status !== 'ok') continue;
    total++;
    // A value a call does not have (TPOT of a one-token answer) counts as 0, as in vLLM.
    if (Object.entries(thresholds).every(([metric, limit]) => (valueOf(item, metric) ?? 0) <= limit)) good++;
  }
  return {
    thresholds,
    good,
    total,
    perSecond: durationMs > 0 ? good / (durationMs / 1000) : 0,
    share: items.length > 0 ? good / items.length : 0,
  };
}
