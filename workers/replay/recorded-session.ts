import { z } from 'zod';
import { zodProblems } from '../../shared/config/zod-problems';
import { formatProblem } from '../../shared/errors';
import { chatMessageSchema, toolSpecSchema, type ChatMessage, type ToolSpec } from '../../shared/trajectory/messages';

/**
 * A recorded agent session as the replay reads it: a collect-stage trajectory, or a production
 * trace in the same shape (OpenAI `messages` and `tools`, one `calls` record per assistant
 * message with its recorded timings). Only what the replay needs is required; everything else a
 * trajectory carries (reward, harness, status) is allowed and ignored.
 */
export const recordedCallSchema = z.looseObject({
  /** Index of the assistant message this call produced. */
  messageIndex: z.number().int().nonnegative(),
  /** Duration of the tool calls the message asked for, ms: replayed as think time before the next call. */
  toolMs: z.number().nonnegative().optional(),
  completionTokens: z.number().int().nonnegative().optional(),
  promptTokens: z.number().int().nonnegative().optional(),
  ttftMs: z.number().nonnegative().optional(),
  e2eMs: z.number().nonnegative().optional(),
});

export const recordedSessionSchema = z.looseObject({
  id: z.string().min(1),
  messages: z.array(chatMessageSchema).min(2),
  tools: z.array(toolSpecSchema).default([]),
  calls: z.array(recordedCallSchema).optional(),
  taskId: z.string().min(1).optional(),
  model: z.looseObject({ simulated: z.boolean().optional() }).optional(),
});

/** One model call of a session to replay. */
export interface ReplayCallPlan {
  /** Index of the recorded assistant message (its context is messages[0..messageIndex)). */
  messageIndex: number;
  /** Recorded think time after this call (its tool batch), ms. */
  thinkMsAfter: number;
  /** Viewer turn of this call: a user message opens a turn, its model calls and tools answer it. */
  turnIndex: number;
  /** The turn's last call (its final answer): the next call, if any, answers a new viewer message. */
  endsTurn: boolean;
  /** Names of the tools this call asked for (their think time may come from the tool latency model). */
  toolNames: string[];
  recordedOutputTokens?: number;
  recordedTtftMs?: number;
  recordedE2eMs?: number;
}

/** A session ready to replay. */
export interface ReplaySession {
  id: string;
  /** `uri: line N`, for messages. */
  source: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** In message order; at least one. */
  calls: ReplayCallPlan[];
  taskId?: string;
  /**
   * Recorded in the simulator (a collect trajectory: it names the harness it ran under), whose
   * tools answer in microseconds: the tool latency model supplies its think time. Production
   * traces carry no harness and keep their recorded tool durations.
   */
  simulator: boolean;
}

/** Why a session was skipped. */
export const unreplayableReasons = [
  'malformed_record',
  'missing_timings',
  'unknown_tools',
  'missing_task',
  'duplicate_id',
] as const;
export type UnreplayableReason = (typeof unreplayableReasons)[number];

export const unreplayableSessionSchema = z.object({
  /** Session id when the record had one. */
  sessionId: z.string().optional(),
  /** `uri: line N`. */
  source: z.string(),
  reason: z.enum(unreplayableReasons),
  detail: z.string(),
});
export type UnreplayableSession = z.infer<typeof unreplayableSessionSchema>;

export type ParsedSession = { ok: true; session: ReplaySession } | { ok: false; unreplayable: UnreplayableSession };

/**
 * Checks one record and turns it into a session plan. Never throws: a record that cannot be
 * replayed comes back with the reason (a malformed record, an assistant message without its call
 * record, a tool message answering no call).
 */
export function parseRecordedSession(value: unknown, source: string): ParsedSession {
  const idOf = (candidate: unknown): string | undefined => {
    const id = (candidate as { id?: unknown } | null)?.id;
    return typeof id === 'string' && id !== '' ? id : undefined;
  };
  const skip = (reason: UnreplayableReason, detail: string): ParsedSession => {
    const sessionId = idOf(value);
    return { ok: false, unreplayable: { ...(sessionId !== undefined ? { sessionId } : {}), source, reason, detail } };
  };
  const parsed = recordedSessionSchema.safeParse(value);
  if (!parsed.success) {
    const problems = zodProblems(parsed.error).slice(0, 3).map(formatProblem);
    return skip(
      'malformed_record',
      `not a recorded session (OpenAI messages with per-call timings): ${problems.join('; ')}`,
    );
  }
  const record = parsed.data;
  const messages = record.messages;
  const answered = new Set<string>();
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index];
    if (message.role === 'assistant') for (const call of message.tool_calls ?? []) answered.add(call.id);
    if (message.role === 'tool' && !answered.has(message.tool_call_id)) {
      return skip(
        'malformed_record',
        `messages[${index}] answers tool_call_id "${message.tool_call_id}", which no earlier assistant message issued`,
      );
    }
  }
  const assistantIndexes = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
  if (assistantIndexes.length === 0)
    return skip('malformed_record', 'the session has no assistant message: nothing to replay');
  if (!record.calls || record.calls.length === 0) {
    return skip(
      'missing_timings',
      'the record has no `calls` (per-call timings); record sessions with their call timings to replay them',
    );
  }
  const callsByIndex = new Map(record.calls.map((call) => [call.messageIndex, call]));
  const calls: ReplayCallPlan[] = [];
  // Turn of each assistant message: the user messages before it, less one (a session that opens
  // with an assistant message counts that as turn 0 too).
  const turnOf = (messageIndex: number): number =>
    Math.max(0, messages.slice(0, messageIndex).filter((message) => message.role === 'user').length - 1);
  for (const [position, messageIndex] of assistantIndexes.entries()) {
    const call = callsByIndex.get(messageIndex);
    if (!call)
      return skip(
        'missing_timings',
        `assistant messages[${messageIndex}] has no calls[] record with messageIndex ${messageIndex}`,
      );
    const message = messages[messageIndex] as Extract<ChatMessage, { role: 'assistant' }>;
    const asksTools = (message.tool_calls?.length ?? 0) > 0;
    const last = position === assistantIndexes.length - 1;
    if (asksTools && !last && call.toolMs === undefined) {
      return skip(
        'missing_timings',
        `calls[] record of messages[${messageIndex}] has no toolMs: the think time before the next call is unknown`,
      );
    }
    const nextIndex = assistantIndexes[position + 1];
    calls.push({
      messageIndex,
      thinkMsAfter: call.toolMs ?? 0,
      turnIndex: turnOf(messageIndex),
      endsTurn: nextIndex === undefined || turnOf(nextIndex) !== turnOf(messageIndex),
      toolNames: (message.tool_calls ?? []).map((toolCall) => toolCall.function.name),
      ...(call.completionTokens !== undefined ? { recordedOutputTokens: call.completionTokens } : {}),
      ...(call.ttftMs !== undefined ? { recordedTtftMs: call.ttftMs } : {}),
      ...(call.e2eMs !== undefined ? { recordedE2eMs: call.e2eMs } : {}),
    });
  }
  for (const call of record.calls) {
    if (messages[call.messageIndex]?.role !== 'assistant') {
      return skip(
        'malformed_record',
        `calls[] names messageIndex ${call.messageIndex}, which is not an assistant message`,
      );
    }
  }
  return {
    ok: true,
    session: {
      id: record.id,
      source,
      messages,
      tools: record.tools,
      calls,
      ...(record.taskId !== undefined ? { taskId: record.taskId } : {}),
      simulator: typeof record.harness === 'object' && record.harness !== null,
    },
  };
}
