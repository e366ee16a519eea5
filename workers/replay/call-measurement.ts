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
  const record = baseRecord(placement, 'ok');
  record.sentMs = sentMs;
  record.scheduleLagMs = scheduleLagMs;
  record.queueMs = timings.queueMs;
  record.retryMs = retryMs;
  record.ttftMs = timings.ttftMs;
  record.e2elMs = timings.e2eMs;
  if (output.count > 1) record.tpotMs = (timings.e2eMs - timings.ttftMs) / (output.count - 1);
  record.ttftFromIntendedMs = beforeSend + timings.ttftMs;
  record.e2elFromIntendedMs = beforeSend + timings.e2eMs;
  record.clientOverheadMs = scheduleLagMs + Math.max(0, ownTime);
  if (timings.writtenMs !== undefined) record.writeMs = timings.writtenMs;
  record.outputTokens = output.count;
  record.outputTokensSource = output.source;
  record.promptTokens = response.usage.promptTokens;
  if (response.usage.cachedPromptTokens !== undefined) record.cachedPromptTokens = response.usage.cachedPromptTokens;
  if (timings.chunkCount !== undefined) record.chunkCount = timings.chunkCount;
  record.finishReason = response.finishReason;
  record.attempts = response.attempts;
  return record;
}

/** The record of a call that failed: excluded from the percentiles, counted by error code. */
export function failedCallRecord(placement: CallPlacement, error: unknown): ReplayCallRecord {
  const message = error instanceof Error ? error.message : String(error);
  const record = baseRecord(placement, 'failed');
  record.errorCode = errorCodeOf(error) ?? 'UNKNOWN_ERROR';
  record.error = message.slice(0, 500);
  record.scheduleLagMs = placement.dispatchMs - placement.intendedMs;
  record.queueMs = 0;
  record.retryMs = 0;
  return record;
}

/**
 * The fields every record starts with, the status after the placement as it always has been.
 * Records are built as one literal of the fields every record has, then named stores in the
 * order the fields have always had (the JSON lines keep their key order). Not Object.assign: an
 * object that gains more than a dozen properties that way is turned into a dictionary (a hash
 * table, about 1.7 KB a record against 0.32 KB), and every record of a part is live until the
 * part ends, so young-generation collections copied and promoted them at that size. The replay's
 * collections copy about three times what a bare HTTP loop's do (its calls keep more alive
 * while in flight), and their pauses are what its late calls wait on. Not a spread either: on
 * Node 20 each property added after a leading spread costs about 2 µs (a new hidden class every
 * time).
 */
function baseRecord(placement: CallPlacement, status: ReplayCallRecord['status']): ReplayCallRecord {
  const record = {
    sessionId: placement.sessionId,
    sessionIndex: placement.sessionIndex,
    callIndex: placement.callIndex,
    messageIndex: placement.messageIndex,
    part: placement.part,
    intendedMs: placement.intendedMs,
    dispatchMs: placement.dispatchMs,
    endMs: placement.endMs,
    thinkMs: placement.thinkMs,
  } as ReplayCallRecord;
  if (placement.recordedTtftMs !== undefined) record.recordedTtftMs = placement.recordedTtftMs;
  if (placement.recordedE2eMs !== undefined) record.recordedE2eMs = placement.recordedE2eMs;
  if (placement.recordedOutputTokens !== undefined) record.recordedOutputTokens = placement.recordedOutputTokens;
  if (placement.divergence !== undefined) record.divergence = placement.divergence;
  record.status = status;
  return record;
}
