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
   * measured beside it, and the verdict: timestamps are doubtful when the replay's loop ran late
   * by more than `doubtfulThresholdMs` (the bare loop's P99 plus 2 ms: what the replay adds).
   */
  client: MergedReplay['client'] & { doubtfulThresholdMs: number; timestampsDoubtful: boolean };
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
    client: clientVerdictOf(merged.client),
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

/** Event-loop lateness (P99, ms) the replay may add above a bare loop's before its timestamps are doubtful. */
export const clientLagNoteMs = 2;

/**
 * Doubtful timestamps: the replay's loop P99 lateness above the bare loop's (measured beside it in
 * the same run) plus 2 ms. A machine that delays every loop alike delays the server's timers too,
 * which a fixed threshold blamed on the replay; without a bare-loop reading the fixed 2 ms stands.
 */
function clientVerdictOf(client: MergedReplay['client']): ReplayReport['client'] {
  const doubtfulThresholdMs = (client.bareLoopDelayP99Ms ?? 0) + clientLagNoteMs;
  return { ...client, doubtfulThresholdMs, timestampsDoubtful: client.eventLoopDelayP99Ms > doubtfulThresholdMs };
}

/** What a reader should know before trusting the figures. */
function notesOf(report: ReplayReport): string[] {
  const notes: string[] = [];
  if (report.target.warning)
    notes.push(`Target: ${report.target.warning}. These latencies do not describe a real model.`);
  if (report.client.timestampsDoubtful) {
    const bare = report.client.bareLoopDelayP99Ms;
    notes.push(
      `The replay client's event loop ran late (P99 ${report.client.eventLoopDelayP99Ms.toFixed(1)} ms${bare !== undefined ? ` against ${bare.toFixed(1)} ms for a bare loop beside it` : ''}, max ${report.client.eventLoopDelayMaxMs.toFixed(1)} ms, busy ${(report.client.eventLoopUtilization * 100).toFixed(0)}%): timestamps can be late by that much, so latencies under ${(report.client.eventLoopDelayP99Ms * 50).toFixed(0)} ms carry more than 2% error. Spread the sessions over more parts (processes or machines) or use a less loaded machine.`,
    );
  } else if ((report.client.bareLoopDelayP99Ms ?? 0) > clientLagNoteMs) {
    notes.push(
      `Every event loop on this machine ran late (a bare loop: P99 ${(report.client.bareLoopDelayP99Ms as number).toFixed(1)} ms; the replay's ${report.client.eventLoopDelayP99Ms.toFixed(1)} ms, within 2 ms of it): the replay added little, but a server on the same machine was delayed alike.`,
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
