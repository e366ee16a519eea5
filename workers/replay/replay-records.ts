import { z } from 'zod';

/**
 * What a replay records per model call and per session. Times are ms from the start of the
 * part's measured phase (performance.now based); `intendedMs` is when the call should have been
 * sent (the session's arrival, or the previous call's end plus its recorded think time),
 * `dispatchMs` when the replay handed it to the model client, `sentMs` when the request went out
 * (after retries and the client's concurrency gate).
 */
export const outputTokenSources = ['usage', 'tokenizer', 'chunks'] as const;

/** How a live call differed from the recorded one at the same step. */
export const liveDivergenceSchema = z.object({
  /** The recorded step asked for tools and the live one did not, or the other way round. */
  kind: z.enum(['none', 'tool_name', 'arguments', 'tool_count', 'tools_vs_answer', 'extra_step']),
  detail: z.string().optional(),
});
export type LiveDivergence = z.infer<typeof liveDivergenceSchema>;

export const replayCallRecordSchema = z.object({
  sessionId: z.string(),
  /** Position of the session in the replay order (over all parts). */
  sessionIndex: z.number().int().nonnegative(),
  callIndex: z.number().int().nonnegative(),
  /** Recorded assistant message this call replays (forced history), or the live message index. */
  messageIndex: z.number().int().nonnegative(),
  part: z.number().int().nonnegative(),
  status: z.enum(['ok', 'failed']),
  errorCode: z.string().optional(),
  error: z.string().optional(),
  intendedMs: z.number(),
  dispatchMs: z.number(),
  sentMs: z.number().optional(),
  endMs: z.number(),
  /** dispatch - intended: how late the replay itself was (timers, a busy event loop, a session cap). */
  scheduleLagMs: z.number(),
  /** Wait at the model client's concurrency/rate gate before sending (the vLLM clock starts after it). */
  queueMs: z.number(),
  /** Time in failed attempts and retry waits before the attempt measured. */
  retryMs: z.number(),
  ttftMs: z.number().optional(),
  e2elMs: z.number().optional(),
  /** (E2EL - TTFT) / (output tokens - 1), only when output tokens > 1. */
  tpotMs: z.number().optional(),
  /** Latency from the intended send time (coordinated-omission safe): lag + retries + gate + TTFT. */
  ttftFromIntendedMs: z.number().optional(),
  e2elFromIntendedMs: z.number().optional(),
  /** Send to the request's last byte handed to the socket (a start burst shows here), ms. */
  writeMs: z.number().optional(),
  /** The replay client's own time: schedule lag plus everything outside gate, retries and send-to-last-chunk. */
  clientOverheadMs: z.number().optional(),
  outputTokens: z.number().int().nonnegative().optional(),
  outputTokensSource: z.enum(outputTokenSources).optional(),
  promptTokens: z.number().int().nonnegative().optional(),
  cachedPromptTokens: z.number().int().nonnegative().optional(),
  chunkCount: z.number().int().nonnegative().optional(),
  finishReason: z.string().optional(),
  attempts: z.number().int().nonnegative().optional(),
  /** Think time replayed after this call, ms. */
  thinkMs: z.number().nonnegative(),
  recordedTtftMs: z.number().optional(),
  recordedE2eMs: z.number().optional(),
  recordedOutputTokens: z.number().int().optional(),
  /** Live mode: how this call compares with the recorded call at the same step. */
  divergence: liveDivergenceSchema.optional(),
});
export type ReplayCallRecord = z.infer<typeof replayCallRecordSchema>;

export const liveSessionSummarySchema = z.object({
  /** Live model calls compared with a recorded call. */
  steps: z.number().int().nonnegative(),
  divergedSteps: z.number().int().nonnegative(),
  toolNameDivergences: z.number().int().nonnegative(),
  argumentDivergences: z.number().int().nonnegative(),
  /** Recorded tool_call_id -> live tool_call_id, for calls matched step by step. */
  toolCallIdMap: z.record(z.string(), z.string()),
});
export type LiveSessionSummary = z.infer<typeof liveSessionSummarySchema>;

export const replaySessionRecordSchema = z.object({
  sessionId: z.string(),
  sessionIndex: z.number().int().nonnegative(),
  part: z.number().int().nonnegative(),
  status: z.enum(['ok', 'failed']),
  error: z.string().optional(),
  calls: z.number().int().nonnegative(),
  intendedStartMs: z.number(),
  startMs: z.number(),
  endMs: z.number(),
  /** First dispatch to the end of the last call. */
  e2eMs: z.number().optional(),
  /** Intended start to the end of the last call. */
  e2eFromIntendedMs: z.number().optional(),
  /** First token of the last assistant turn, from the session's first dispatch. */
  finalAnswerTtftMs: z.number().optional(),
  finalAnswerTtftFromIntendedMs: z.number().optional(),
  /** Sum of E2EL of the session's calls. */
  modelMs: z.number().optional(),
  /** Recorded tool durations replayed as think time. */
  toolMs: z.number().optional(),
  /** e2e - model - tool: gate waits, retries, schedule lag and client work. */
  overheadMs: z.number().optional(),
  live: liveSessionSummarySchema.optional(),
});
export type ReplaySessionRecord = z.infer<typeof replaySessionRecordSchema>;

/**
 * One viewer turn: a viewer message, the agent's model calls and tool calls, the final answer.
 * The viewer's message arrives at the intended time of the turn's first call; `startMs` is when
 * that call was dispatched. Times are ms of the part's measured phase, like the calls'.
 */
export const replayTurnRecordSchema = z.object({
  sessionId: z.string(),
  sessionIndex: z.number().int().nonnegative(),
  turnIndex: z.number().int().nonnegative(),
  part: z.number().int().nonnegative(),
  /** failed: a call of the turn failed, or the session stopped before the turn's final answer. */
  status: z.enum(['ok', 'failed']),
  /** Model calls of the turn. */
  calls: z.number().int().nonnegative(),
  /** When the viewer's message arrived (intended time of the turn's first call). */
  intendedStartMs: z.number(),
  /** Dispatch of the turn's first call. */
  startMs: z.number(),
  /** First answer text of the final answer (its first chunk when it carried no text). */
  firstTokenAtMs: z.number().optional(),
  /** End of the final answer (its last chunk). */
  endMs: z.number().optional(),
  firstTokenMs: z.number().optional(),
  firstTokenFromIntendedMs: z.number().optional(),
  responseMs: z.number().optional(),
  responseFromIntendedMs: z.number().optional(),
  /** Think time replayed between the turn's calls (its tools). */
  toolMs: z.number().nonnegative().optional(),
  /** Sum of E2EL of the turn's calls. */
  modelMs: z.number().nonnegative().optional(),
});
export type ReplayTurnRecord = z.infer<typeof replayTurnRecordSchema>;
