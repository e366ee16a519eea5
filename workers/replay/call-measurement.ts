import type { ChatResponse } from '../../shared/models/model-client';
import { errorCodeOf } from '../../shared/errors';
import type { LiveDivergence, ReplayCallRecord } from './replay-records';

/** Counts tokens of text (a target tokenizer's `encode(text).length`). */
export interface TokenCounter {
  count(text: string): number;
}

/** Where a call sits and when it was meant to go, for its record. */
export interface CallPlacement {
  sessionId: string;
  sessionIndex: number;
  callIndex: number;
  messageIndex: number;
  part: number;
  intendedMs: number;
  dispatchMs: number;
  endMs: number;
  thinkMs: number;
  recordedTtftMs?: number;
  recordedE2eMs?: number;
  recordedOutputTokens?: number;
  divergence?: LiveDivergence;
}

/**
 * Output tokens as vLLM's benchmark takes them: the server's `usage.completion_tokens`; without
 * usage, the output retokenized with the target's tokenizer when one is configured, else the
 * client's estimate (content-bearing chunks). Anything but `usage` is flagged in the record.
 */
export function outputTokensOf(
  response: ChatResponse,
  tokenizer?: TokenCounter,
): { count: number; source: 'usage' | 'tokenizer' | 'chunks' } {
  if (!response.usage.estimated) return { count: response.usage.completionTokens, source: 'usage' };
  if (tokenizer) {
    const message = response.message;
    const text = [
      message.reasoning_content ?? '',
      message.content ?? '',
      ...(message.tool_calls ?? []).map((call) => `${call.function.name}${call.function.arguments}`),
    ].join('');
    return { count: tokenizer.count(text), source: 'tokenizer' };
  }
  return { count: response.usage.completionTokens, source: 'chunks' };
}

/** The record of a call that returned, with every vLLM metric and the intended-time variants. */
export function succeededCallRecord(
  placement: CallPlacement,
  response: ChatResponse,
  tokenizer?: TokenCounter,
): ReplayCallRecord {
  const { timings } = response;
  const retryMs = timings.retryMs ?? 0;
  const sentMs = placement.dispatchMs + retryMs + timings.queueMs;
  const scheduleLagMs = placement.dispatchMs - placement.intendedMs;
  const output = outputTokensOf(response, tokenizer);
  const beforeSend = sentMs - placement.intendedMs;
  const ownTime = placement.endMs - placement.dispatchMs - retryMs - timings.queueMs - timings.e2eMs;
  return Object.assign(baseRecord(placement), {
    status: 'ok' as const,
    sentMs,
    scheduleLagMs,
    queueMs: timings.queueMs,
    retryMs,
    ttftMs: timings.ttftMs,
    e2elMs: timings.e2eMs,
    ...(output.count > 1 ? { tpotMs: (timings.e2eMs - timings.ttftMs) / (output.count - 1) } : {}),
    ttftFromIntendedMs: beforeSend + timings.ttftMs,
    e2elFromIntendedMs: beforeSend + timings.e2eMs,
    clientOverheadMs: scheduleLagMs + Math.max(0, ownTime),
    ...(timings.writtenMs !== undefined ? { writeMs: timings.writtenMs } : {}),
    outputTokens: output.count,
    outputTokensSource: output.source,
    promptTokens: response.usage.promptTokens,
    ...(response.usage.cachedPromptTokens !== undefined
      ? { cachedPromptTokens: response.usage.cachedPromptTokens }
      : {}),
    ...(timings.chunkCount !== undefined ? { chunkCount: timings.chunkCount } : {}),
    finishReason: response.finishReason,
    attempts: response.attempts,
  });
}

/** The record of a call that failed: excluded from the percentiles, counted by error code. */
export function failedCallRecord(placement: CallPlacement, error: unknown): ReplayCallRecord {
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(baseRecord(placement), {
    status: 'failed' as const,
    errorCode: errorCodeOf(error) ?? 'UNKNOWN_ERROR',
    error: message.slice(0, 500),
    scheduleLagMs: placement.dispatchMs - placement.intendedMs,
    queueMs: 0,
    retryMs: 0,
  });
}

/**
 * The fields every record starts with. Records extend it with Object.assign rather than
 * `{ ...baseRecord(placement), status, ... }`: on Node 20 each property added after a leading
 * object spread costs about 2 µs (a new hidden class every time), some 40 µs per call record.
 */
function baseRecord(placement: CallPlacement) {
  return {
    sessionId: placement.sessionId,
    sessionIndex: placement.sessionIndex,
    callIndex: placement.callIndex,
    messageIndex: placement.messageIndex,
    part: placement.part,
    intendedMs: placement.intendedMs,
    dispatchMs: placement.dispatchMs,
    endMs: placement.endMs,
    thinkMs: placement.thinkMs,
    ...(placement.recordedTtftMs !== undefined ? { recordedTtftMs: placement.recordedTtftMs } : {}),
    ...(placement.recordedE2eMs !== undefined ? { recordedE2eMs: placement.recordedE2eMs } : {}),
    ...(placement.recordedOutputTokens !== undefined ? { recordedOutputTokens: placement.recordedOutputTokens } : {}),
    ...(placement.divergence !== undefined ? { divergence: placement.divergence } : {}),
  };
}
