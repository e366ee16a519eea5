import { z } from 'zod';
import { summarizeSamples, type MetricSummary } from '../../shared/metrics/metric-summary';
import { serializedSampleSetSchema } from '../../shared/metrics/sample-set';
import { specDecodeDelta, type SpecDecodeReport } from '../../shared/metrics/spec-decode';
import { loadProfileSchema, type LoadProfile } from './load-profile';
import type { MergedReplay } from './merge-replay-parts';
import { unreplayableSessionSchema } from './recorded-session';
import { replayMetrics } from './replay-metrics';
import { evaluateSlo, type SloConfig, type SloReport } from './slo';
import { targetInfoSchema } from './target-info';

export const REPLAY_REPORT_SCHEMA_VERSION = 1;
export const replayModes = ['forced-history', 'live'] as const;
export type ReplayMode = (typeof replayModes)[number];

const metricSummarySchema = z.object({
  count: z.number().int().nonnegative(),
  mean: z.number().nullable(),
  std: z.number().nullable(),
  min: z.number().nullable(),
  max: z.number().nullable(),
  percentiles: z.record(z.string(), z.number().nullable()),
});

/**
 * The replay report (`report.json`). Read back by `hat replay compare`, so its shape is a
 * contract: raw samples ride along (base64 float64 per metric) so two reports can be compared
 * with bootstrap intervals, and so reports of separate runs can be pooled exactly.
 */
export const replayReportSchema = z.looseObject({
  schemaVersion: z.literal(REPLAY_REPORT_SCHEMA_VERSION),
  kind: z.literal('hat-replay-report'),
  runId: z.string(),
  createdAt: z.string(),
  /** Shown first: what was measured, and a warning when it is not a real model. */
  target: targetInfoSchema,
  mode: z.enum(replayModes),
  load: loadProfileSchema,
  parts: z.number().int().positive(),
  warmup: z.object({
    sessions: z.number().int().nonnegative(),
    calls: z.number().int().nonnegative(),
    failedCalls: z.number().int().nonnegative(),
  }),
  percentiles: z.array(z.number()),
  window: z.object({ startedAt: z.string(), durationMs: z.number().nonnegative() }),
  counts: z.object({
    sessions: z.number().int().nonnegative(),
    sessionsFailed: z.number().int().nonnegative(),
    turns: z.number().int().nonnegative().optional(),
    turnsFailed: z.number().int().nonnegative().optional(),
    calls: z.number().int().nonnegative(),
    callsFailed: z.number().int().nonnegative(),
    retriedCalls: z.number().int().nonnegative().optional(),
    failedAttempts: z.number().int().nonnegative().optional(),
    unreplayable: z.number().int().nonnegative(),
    outputTokensEstimated: z.number().int().nonnegative(),
  }),
  throughput: z.object({
    requestsPerSecond: z.number(),
    sessionsPerSecond: z.number(),
    outputTokensPerSecond: z.number(),
  }),
  metrics: z.record(
    z.string(),
    z.object({
      scope: z.enum(['call', 'turn', 'session']),
      unit: z.string(),
      description: z.string(),
      summary: metricSummarySchema,
    }),
  ),
  slo: z.looseObject({ verdict: z.enum(['pass', 'fail', 'no-data']) }),
  specDecode: z.looseObject({ available: z.boolean(), note: z.string() }),
  client: z.looseObject({
    eventLoopDelayP99Ms: z.number(),
    eventLoopDelayMaxMs: z.number(),
    eventLoopUtilization: z.number(),
  }),
  failures: z.array(z.object({ code: z.string(), count: z.number().int().positive(), example: z.string() })),
  unreplayable: z.array(unreplayableSessionSchema),
  notes: z.array(z.string()),
  samples: serializedSampleSetSchema,
});

export interface LiveReport {
  /** Live calls compared with a recorded call at the same step. */
  steps: number;
  divergedSteps: number;
  /** divergedSteps / steps. */
  divergenceRate: number | null;
  toolNameDivergences: number;
  argumentDivergences: number;
  sessionsDiverged: number;
}

export interface ReplayReport {
  schemaVersion: typeof REPLAY_REPORT_SCHEMA_VERSION;
  kind: 'hat-replay-report';
  runId: string;
  createdAt: string;
  target: MergedReplay['target'];
  mode: ReplayMode;
  load: LoadProfile;
  parts: number;
  warmup: MergedReplay['warmup'];
  percentiles: number[];
  window: { startedAt: string; durationMs: number };
  counts: {
    sessions: number;
    sessionsFailed: number;
    /** Viewer turns answered, and those cut off (a failed call, the session's end). */
    turns?: number;
    turnsFailed?: number;
    calls: number;
    callsFailed: number;
    /** Calls that succeeded after retries (their figures are left out of the call percentiles), and their failed attempts. */
    retriedCalls?: number;
    failedAttempts?: number;
    unreplayable: number;
    outputTokensEstimated: number;
  };
  throughput: { requestsPerSecond: number; sessionsPerSecond: number; outputTokensPerSecond: number };
  metrics: Record<
    string,
    { scope: 'call' | 'turn' | 'session'; unit: string; description: string; summary: MetricSummary }
  >;
  slo: SloReport;
  specDecode: SpecDecodeReport;
  /**
   * The replay client's own event loop during the measured phase (the worst part), the bare loop
   * measured beside it, and the verdict. Every timestamp waits for the loop, so a figure can be
   * off by up to the loop's lateness: `possibleErrorMs` (its P99) for figures up to P95,
   * `possibleErrorTailMs` (its P99.9) for higher percentiles. A timestamp metric whose figures can
   * be off by more than `tolerance` (2%) under that bound is listed in `doubtfulMetrics`, and
   * `timestampsDoubtful` is true when any is.
   */
  client: MergedReplay['client'] & ClientVerdict;
  live?: LiveReport;
  failures: Array<{ code: string; count: number; example: string }>;
  unreplayable: MergedReplay['unreplayable'];
  notes: string[];
  samples: Record<string, string>;
}

export interface ReplayReportSettings {
  runId: string;
  createdAt: string;
  mode: ReplayMode;
  /** The whole load (all parts together). */
  load: LoadProfile;
  percentiles: readonly number[];
  slo: SloConfig;
}

/** Summaries, SLO verdicts, goodput, spec-decode acceptance and notes of a merged replay. */
export function buildReplayReport(merged: MergedReplay, settings: ReplayReportSettings): ReplayReport {
  const { calls, sessions, samples } = merged;
  const seconds = merged.window.durationMs / 1000;
  const okCalls = calls.filter((call) => call.status === 'ok');
  const failedCalls = calls.filter((call) => call.status === 'failed');
  const outputTokens = okCalls.reduce((sum, call) => sum + (call.outputTokens ?? 0), 0);
  const metrics: ReplayReport['metrics'] = {};
  for (const metric of replayMetrics) {
    metrics[metric.name] = {
      scope: metric.scope,
      unit: metric.unit,
      description: metric.description,
      summary: summarizeSamples(samples.get(metric.name), settings.percentiles),
    };
  }
  const failures = new Map<string, { count: number; example: string }>();
  for (const call of failedCalls) {
    const code = call.errorCode ?? 'UNKNOWN_ERROR';
    const entry = failures.get(code) ?? { count: 0, example: call.error ?? '' };
    entry.count++;
    failures.set(code, entry);
  }
  // Attempts that failed before a retry succeeded are failures too, as vLLM (which never retries) would count them.
  const retried = okCalls.filter((call) => (call.attempts ?? 1) > 1);
  if (retried.length > 0) {
    failures.set('RETRIED_ATTEMPT', {
      count: retried.reduce((sum, call) => sum + (call.attempts as number) - 1, 0),
      example: `call ${retried[0].callIndex} of ${retried[0].sessionId} succeeded on attempt ${retried[0].attempts}`,
    });
  }
  const specDecode: SpecDecodeReport =
    merged.specDecode.before && merged.specDecode.after
      ? specDecodeDelta(merged.specDecode.before.counters, merged.specDecode.after.counters)
      : {
          available: false,
          note:
            merged.specDecode.errors.length > 0
              ? `the server metrics could not be read: ${merged.specDecode.errors.join('; ')}`
              : 'no metrics endpoint was read (metricsUrl unset or false)',
        };
  const report: ReplayReport = {
    schemaVersion: REPLAY_REPORT_SCHEMA_VERSION,
    kind: 'hat-replay-report',
    runId: settings.runId,
    createdAt: settings.createdAt,
    target: merged.target,
    mode: settings.mode,
    load: settings.load,
    parts: merged.parts,
    warmup: merged.warmup,
    percentiles: [...settings.percentiles],
    window: { startedAt: new Date(merged.window.startEpochMs).toISOString(), durationMs: merged.window.durationMs },
    counts: {
      sessions: sessions.length,
      sessionsFailed: sessions.filter((session) => session.status === 'failed').length,
      turns: merged.turns.filter((turn) => turn.status === 'ok').length,
      turnsFailed: merged.turns.filter((turn) => turn.status === 'failed').length,
      calls: calls.length,
      callsFailed: failedCalls.length,
      retriedCalls: okCalls.filter((call) => (call.attempts ?? 1) > 1).length,
      failedAttempts: okCalls.reduce((sum, call) => sum + Math.max(0, (call.attempts ?? 1) - 1), 0),
      unreplayable: merged.unreplayable.length,
      outputTokensEstimated: okCalls.filter((call) => call.outputTokensSource !== 'usage').length,
    },
    throughput: {
      requestsPerSecond: seconds > 0 ? okCalls.length / seconds : 0,
      sessionsPerSecond: seconds > 0 ? sessions.filter((session) => session.status === 'ok').length / seconds : 0,
      outputTokensPerSecond: seconds > 0 ? outputTokens / seconds : 0,
    },
    metrics,
    slo: evaluateSlo(settings.slo, samples, { calls, turns: merged.turns, sessions }, merged.window.durationMs),
    specDecode,
    client: { ...merged.client, ...possibleTimestampErrors(merged.client, metrics) },
    ...(settings.mode === 'live' ? { live: liveReportOf(merged) } : {}),
    failures: [...failures.entries()]
      .map(([code, entry]) => ({ code, ...entry }))
      .sort((left, right) => right.count - left.count || left.code.localeCompare(right.code)),
    unreplayable: merged.unreplayable,
    notes: [],
    samples: samples.toJSON(),
  };
  report.notes = notesOf(report);
  return report;
}

function liveReportOf(merged: MergedReplay): LiveReport {
  const summaries = merged.sessions.flatMap((session) => (session.live ? [session.live] : []));
  const steps = summaries.reduce((sum, live) => sum + live.steps, 0);
  const divergedSteps = summaries.reduce((sum, live) => sum + live.divergedSteps, 0);
  return {
    steps,
    divergedSteps,
    divergenceRate: steps > 0 ? divergedSteps / steps : null,
    toolNameDivergences: summaries.reduce((sum, live) => sum + live.toolNameDivergences, 0),
    argumentDivergences: summaries.reduce((sum, live) => sum + live.argumentDivergences, 0),
    sessionsDiverged: summaries.filter((live) => live.divergedSteps > 0).length,
  };
}

/** The relative error the replay promises for its timestamp figures, or flags them as doubtful. */
export const timestampTolerance = 0.02;

/** A bare loop later than this (P99, ms) gets a note: a server on the same machine was delayed alike. */
const bareLoopNoteMs = 2;

/** Metrics made of stream timestamps: a late event loop moves them. */
const timestampMetrics = [
  'ttft_ms',
  'tpot_ms',
  'itl_ms',
  'e2el_ms',
  'ttft_from_intended_ms',
  'e2el_from_intended_ms',
  'turn_first_token_ms',
  'turn_first_token_from_intended_ms',
  'turn_response_ms',
  'turn_response_from_intended_ms',
  'session_e2e_ms',
  'session_e2e_from_intended_ms',
  'final_answer_ttft_ms',
  'final_answer_ttft_from_intended_ms',
];

export interface ClientVerdict {
  /** Most a figure up to P95 can be off by (ms): the replay loop's lateness P99. */
  possibleErrorMs: number;
  /** Most a figure above P95 can be off by (ms): the loop's lateness P99.9 (its max without one). */
  possibleErrorTailMs: number;
  tolerance: number;
  /** Timestamp metrics with a figure that can be off by more than `tolerance`, and by how much at most (0-1). */
  doubtfulMetrics: Array<{ metric: string; percentile: string; possibleError: number }>;
  timestampsDoubtful: boolean;
}

/**
 * The largest relative error each reported percentile of a timestamp metric can carry. A
 * timestamp is late by the loop's lateness at most (P99 of it for figures up to P95, P99.9 above:
 * a tail figure rests on the tail of the lateness). TPOT divides a difference of two timestamps by
 * the tokens after the first, so its bound is the lateness over E2EL - TTFT at that percentile.
 * The bare loop is not subtracted: a busy machine delays the replay's reads as much as its own.
 */
export function possibleTimestampErrors(
  client: MergedReplay['client'],
  metrics: ReplayReport['metrics'],
): ClientVerdict {
  const possibleErrorMs = client.eventLoopDelayP99Ms;
  const possibleErrorTailMs = client.eventLoopDelayP999Ms ?? client.eventLoopDelayMaxMs;
  const doubtfulMetrics: ClientVerdict['doubtfulMetrics'] = [];
  const outputTokens = metrics.output_tokens?.summary.percentiles.p50 ?? null;
  for (const metric of timestampMetrics) {
    const summary = metrics[metric]?.summary;
    if (!summary || summary.count === 0) continue;
    for (const [percentile, value] of Object.entries(summary.percentiles)) {
      if (value === null || value === undefined) continue;
      const rank = Number(percentile.replace(/^p/, '').replace('_', '.'));
      const boundMs = rank > 95 ? possibleErrorTailMs : possibleErrorMs;
      const span =
        metric === 'tpot_ms' && outputTokens !== null && outputTokens > 1 ? value * (outputTokens - 1) : value;
      const possibleError = span > 0 ? boundMs / span : Number.POSITIVE_INFINITY;
      if (possibleError > timestampTolerance) doubtfulMetrics.push({ metric, percentile, possibleError });
    }
  }
  return {
    possibleErrorMs,
    possibleErrorTailMs,
    tolerance: timestampTolerance,
    doubtfulMetrics,
    timestampsDoubtful: doubtfulMetrics.length > 0,
  };
}

/** What a reader should know before trusting the figures. */
function notesOf(report: ReplayReport): string[] {
  const notes: string[] = [];
  if (report.target.warning)
    notes.push(`Target: ${report.target.warning}. These latencies do not describe a real model.`);
  const client = report.client;
  const bare = client.bareLoopDelayP99Ms;
  if (client.timestampsDoubtful) {
    const listed = client.doubtfulMetrics
      .slice(0, 8)
      .map((entry) => `${entry.metric} ${entry.percentile} (up to ${(entry.possibleError * 100).toFixed(1)}%)`)
      .join(', ');
    const more = client.doubtfulMetrics.length > 8 ? ` and ${client.doubtfulMetrics.length - 8} more` : '';
    notes.push(
      `Timestamps doubtful: the replay client's event loop ran late (lateness P99 ${client.possibleErrorMs.toFixed(2)} ms, P99.9 ${client.possibleErrorTailMs.toFixed(2)} ms${bare !== undefined ? `; a bare loop beside it: P99 ${bare.toFixed(2)} ms` : ''}; busy ${(client.eventLoopUtilization * 100).toFixed(0)}%), so these figures can be off by more than ${(client.tolerance * 100).toFixed(0)}%: ${listed}${more}. Spread the sessions over more parts (processes or machines) or use a less loaded machine.`,
    );
  } else if ((bare ?? 0) > bareLoopNoteMs) {
    notes.push(
      `Every event loop on this machine ran late (a bare loop: P99 ${(bare as number).toFixed(1)} ms): the replay's figures hold within ${(client.tolerance * 100).toFixed(0)}%, but a server on the same machine was delayed alike.`,
    );
  }
  const write = report.metrics.request_write_ms?.summary;
  if (write && write.count > 0 && write.max !== null && write.max > 2) {
    notes.push(
      `Requests finished writing up to ${write.max.toFixed(1)} ms after their send (P50 ${(write.percentiles.p50 ?? 0).toFixed(2)} ms, P99 ${(write.percentiles.p99 ?? write.max).toFixed(2)} ms; request_write_ms): the vLLM clock had started while the server did not yet have the request, typically in a closed loop's start burst, when every session sends in the same tick. Warm up with at least the concurrency (warmupSessions) and judge the steady state by the later calls.`,
    );
  }
  const queueP99 = report.metrics.queue_ms?.summary.percentiles.p99 ?? report.metrics.queue_ms?.summary.max ?? null;
  if (queueP99 !== null && queueP99 > 1) {
    notes.push(
      `Requests waited at the model client's gate (queue P99 ${queueP99.toFixed(1)} ms): the client's concurrency (target.concurrency for openai) is below the offered load. vLLM-clock figures exclude that wait; the *_from_intended figures include it.`,
    );
  }
  if (report.counts.outputTokensEstimated > 0) {
    notes.push(
      `${report.counts.outputTokensEstimated} call(s) had no usage.completion_tokens; their output tokens were retokenized or estimated (see outputTokensSource in requests.csv), so their TPOT is approximate.`,
    );
  }
  if ((report.counts.retriedCalls ?? 0) > 0) {
    notes.push(
      `${report.counts.retriedCalls} call(s) succeeded only after retries (${report.counts.failedAttempts} failed attempt(s), counted under failures as RETRIED_ATTEMPT); their call figures are left out of the call percentiles, while their sessions and turns include the retry time. Replays default to maxRetries 0 on openai targets.`,
    );
  }
  if (report.counts.callsFailed > 0)
    notes.push(
      `${report.counts.callsFailed} call(s) failed and are excluded from the percentiles (see failures); their sessions are counted as failed.`,
    );
  if (report.specDecode.available)
    notes.push(
      'Speculative decoding: one chunk may carry several tokens, so ITL is not per token; compare TPOT, not ITL. The counters are server-wide.',
    );
  if (report.parts > 1)
    notes.push(
      `${report.parts} parts: each offered its share of the load; the figures assume they ran side by side (the window is the union of theirs).`,
    );
  return notes;
}
