import type { SampleSet } from '../../shared/metrics/sample-set';
import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';

/** A metric of the replay report. */
export interface ReplayMetricDefinition {
  name: string;
  scope: 'call' | 'turn' | 'session';
  unit: 'ms' | 'tokens' | 'calls';
  /** One line for reports. */
  description: string;
}

/**
 * Every metric a replay reports, in report order. Call metrics follow `vllm bench serve`
 * exactly (TTFT, TPOT, ITL pooled per chunk, E2EL); the `_from_intended` ones add the wait
 * between the intended send time and the actual send, so a slow server cannot hide behind a
 * client that sends late (coordinated omission).
 */
export const replayMetrics: readonly ReplayMetricDefinition[] = [
  {
    name: 'ttft_ms',
    scope: 'call',
    unit: 'ms',
    description: 'time to first token: send to the first chunk with choices (vLLM TTFT)',
  },
  {
    name: 'tpot_ms',
    scope: 'call',
    unit: 'ms',
    description: '(E2EL - TTFT) / (output tokens - 1), calls with more than one output token (vLLM TPOT)',
  },
  {
    name: 'itl_ms',
    scope: 'call',
    unit: 'ms',
    description:
      'gaps between consecutive chunks with choices, pooled over calls (vLLM ITL; one chunk may carry several tokens)',
  },
  { name: 'e2el_ms', scope: 'call', unit: 'ms', description: 'send to the last chunk with choices (vLLM E2EL)' },
  {
    name: 'output_tokens',
    scope: 'call',
    unit: 'tokens',
    description: 'usage.completion_tokens, else retokenized or estimated (flagged)',
  },
  {
    name: 'ttft_from_intended_ms',
    scope: 'call',
    unit: 'ms',
    description: 'TTFT measured from the intended send time (includes schedule lag, retries and the client gate)',
  },
  {
    name: 'e2el_from_intended_ms',
    scope: 'call',
    unit: 'ms',
    description: 'E2EL measured from the intended send time',
  },
  {
    name: 'queue_ms',
    scope: 'call',
    unit: 'ms',
    description: "wait at the model client's concurrency/rate gate before sending",
  },
  {
    name: 'schedule_lag_ms',
    scope: 'call',
    unit: 'ms',
    description: 'actual dispatch - intended send time (timers, busy event loop, session cap)',
  },
  {
    name: 'request_write_ms',
    scope: 'call',
    unit: 'ms',
    description:
      "send to the request's last byte handed to the socket: its spread shows a start burst (the vLLM clock has started, the server has not the request yet)",
  },
  {
    name: 'client_overhead_ms',
    scope: 'call',
    unit: 'ms',
    description: "the replay client's own time per call: schedule lag, request building, response assembly",
  },
  {
    name: 'turn_first_token_ms',
    scope: 'turn',
    unit: 'ms',
    description:
      "viewer turn: the turn's first dispatch to the first answer text of its final answer (when speech can start)",
  },
  {
    name: 'turn_first_token_from_intended_ms',
    scope: 'turn',
    unit: 'ms',
    description: "viewer turn: the viewer's message (intended send of the turn's first call) to the first answer text",
  },
  {
    name: 'turn_response_ms',
    scope: 'turn',
    unit: 'ms',
    description: "viewer turn: the turn's first dispatch to the last token of its final answer",
  },
  {
    name: 'turn_response_from_intended_ms',
    scope: 'turn',
    unit: 'ms',
    description: "viewer turn: the viewer's message to the last token of the final answer (the default SLO)",
  },
  {
    name: 'turn_calls',
    scope: 'turn',
    unit: 'calls',
    description: 'model calls per viewer turn (tool steps plus the final answer)',
  },
  {
    name: 'turn_tool_ms',
    scope: 'turn',
    unit: 'ms',
    description: "think time replayed within the turn (its tools: recorded, or the tool latency model's)",
  },
  { name: 'turn_model_ms', scope: 'turn', unit: 'ms', description: "sum of E2EL over the turn's calls" },
  {
    name: 'session_e2e_ms',
    scope: 'session',
    unit: 'ms',
    description: 'session start (first dispatch) to the end of its last call',
  },
  {
    name: 'session_e2e_from_intended_ms',
    scope: 'session',
    unit: 'ms',
    description: 'intended session start to the end of its last call',
  },
  {
    name: 'final_answer_ttft_ms',
    scope: 'session',
    unit: 'ms',
    description: 'session start to the first token of the last assistant turn',
  },
  {
    name: 'final_answer_ttft_from_intended_ms',
    scope: 'session',
    unit: 'ms',
    description: 'intended session start to the first token of the last assistant turn',
  },
  { name: 'session_model_ms', scope: 'session', unit: 'ms', description: 'sum of E2EL over the session' },
  {
    name: 'session_tool_ms',
    scope: 'session',
    unit: 'ms',
    description: 'recorded tool durations replayed as think time',
  },
  { name: 'session_overhead_ms', scope: 'session', unit: 'ms', description: 'session e2e - model time - tool time' },
];

export const replayMetricNames = replayMetrics.map((metric) => metric.name);

export function findReplayMetric(name: string): ReplayMetricDefinition | undefined {
  return replayMetrics.find((metric) => metric.name === name);
}

/** Record field of each per-item metric (ITL has none: it is per chunk). */
const callFields: Partial<Record<string, keyof ReplayCallRecord>> = {
  ttft_ms: 'ttftMs',
  tpot_ms: 'tpotMs',
  e2el_ms: 'e2elMs',
  output_tokens: 'outputTokens',
  ttft_from_intended_ms: 'ttftFromIntendedMs',
  e2el_from_intended_ms: 'e2elFromIntendedMs',
  queue_ms: 'queueMs',
  schedule_lag_ms: 'scheduleLagMs',
  client_overhead_ms: 'clientOverheadMs',
  request_write_ms: 'writeMs',
};
const sessionFields: Partial<Record<string, keyof ReplaySessionRecord>> = {
  session_e2e_ms: 'e2eMs',
  session_e2e_from_intended_ms: 'e2eFromIntendedMs',
  final_answer_ttft_ms: 'finalAnswerTtftMs',
  final_answer_ttft_from_intended_ms: 'finalAnswerTtftFromIntendedMs',
  session_model_ms: 'modelMs',
  session_tool_ms: 'toolMs',
  session_overhead_ms: 'overheadMs',
};

const turnFields: Partial<Record<string, keyof ReplayTurnRecord>> = {
  turn_first_token_ms: 'firstTokenMs',
  turn_first_token_from_intended_ms: 'firstTokenFromIntendedMs',
  turn_response_ms: 'responseMs',
  turn_response_from_intended_ms: 'responseFromIntendedMs',
  turn_calls: 'calls',
  turn_tool_ms: 'toolMs',
  turn_model_ms: 'modelMs',
};

/** A call's value of a metric, undefined when the call has none (TPOT of a one-token answer). */
export function callValue(call: ReplayCallRecord, metric: string): number | undefined {
  const field = callFields[metric];
  return field === undefined ? undefined : (call[field] as number | undefined);
}

export function sessionValue(session: ReplaySessionRecord, metric: string): number | undefined {
  const field = sessionFields[metric];
  return field === undefined ? undefined : (session[field] as number | undefined);
}

export function turnValue(turn: ReplayTurnRecord, metric: string): number | undefined {
  const field = turnFields[metric];
  return field === undefined ? undefined : (turn[field] as number | undefined);
}

export function addTurnSamples(samples: SampleSet, turn: ReplayTurnRecord): void {
  if (turn.status !== 'ok') return;
  for (const metric of Object.keys(turnFields)) {
    const value = turnValue(turn, metric);
    if (value !== undefined) samples.add(metric, value);
  }
}

/**
 * Samples of one successful call; ITL gaps are pooled, one sample per gap. A call that succeeded
 * only after retries gives none: its figures describe its last attempt, not the call (vLLM's
 * benchmark never retries; the report counts its failed attempts as failures instead).
 */
export function addCallSamples(samples: SampleSet, call: ReplayCallRecord, itlMs: readonly number[]): void {
  if (call.status !== 'ok' || (call.attempts ?? 1) > 1) return;
  for (const metric of Object.keys(callFields)) {
    const value = callValue(call, metric);
    if (value !== undefined) samples.add(metric, value);
  }
  for (const gap of itlMs) samples.add('itl_ms', gap);
}

export function addSessionSamples(samples: SampleSet, session: ReplaySessionRecord): void {
  if (session.status !== 'ok') return;
  for (const metric of Object.keys(sessionFields)) {
    const value = sessionValue(session, metric);
    if (value !== undefined) samples.add(metric, value);
  }
}
