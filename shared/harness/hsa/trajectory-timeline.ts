import type { AssistantMessage, ChatMessage } from '../../trajectory/messages';
import type { Harness, HookEvent } from '../harness-types';
import { renderHookInjections, renderSystemPrompt, type RenderContext } from '../render';

/**
 * A trajectory split into what the viewer, the model and the tools produced and what the
 * harness injected, following the simulator's agent loop (shared/simulator/agent-loop.ts): the
 * system prompt, session_start system messages, then per viewer turn the user text with the
 * user-suffix hooks (session_start on the first turn, user_message, before_reply), the
 * user_message and before_reply system messages, and model steps; after each tool batch the
 * after_tool_result suffix on the last result and its system messages. Rebuilding a timeline
 * under the harness it was parsed with gives back the original messages exactly, which is how
 * a trajectory that was not recorded under that harness and context is recognized.
 */

export type TimelineEntry =
  | { kind: 'user'; text: string; turn: number }
  | { kind: 'assistant'; message: AssistantMessage; sourceIndex: number }
  | { kind: 'tool'; toolCallId: string; content: string; sourceIndex: number; lastOfBatch: boolean };

export interface Timeline {
  entries: TimelineEntry[];
}

type Injections = Record<HookEvent, { userSuffix: string; systemMessages: string[] }>;

function injectionsOf(harness: Harness, context: RenderContext): Injections {
  return {
    session_start: renderHookInjections(harness, 'session_start', context),
    user_message: renderHookInjections(harness, 'user_message', context),
    before_reply: renderHookInjections(harness, 'before_reply', context),
    after_tool_result: renderHookInjections(harness, 'after_tool_result', context),
  };
}

/** The agent loop's joining of a suffix onto text (suffixes start on a new line). */
function joinSuffix(text: string, suffix: string): string {
  if (suffix === '') return text;
  return suffix.startsWith('\n') ? `${text}${suffix}` : `${text}\n${suffix}`;
}

function userSuffix(injections: Injections, turn: number): string {
  return (
    (turn === 0 ? injections.session_start.userSuffix : '') +
    injections.user_message.userSuffix +
    injections.before_reply.userSuffix
  );
}

function stripSuffix(content: string, suffix: string): string | undefined {
  if (suffix === '') return content;
  const joined = suffix.startsWith('\n') ? suffix : `\n${suffix}`;
  return content.endsWith(joined) ? content.slice(0, content.length - joined.length) : undefined;
}

export type TimelineResult = { ok: true; timeline: Timeline } | { ok: false; reason: string };

/** Parses messages recorded under `harness` in `context`; fails (with why) when they do not match it. */
export function parseTimeline(
  messages: readonly ChatMessage[],
  harness: Harness,
  context: RenderContext,
): TimelineResult {
  const injections = injectionsOf(harness, context);
  const fail = (index: number, what: string): TimelineResult => ({ ok: false, reason: `message ${index}: ${what}` });
  const first = messages[0];
  if (first?.role !== 'system' || first.content !== renderSystemPrompt(harness, context))
    return fail(0, 'the system prompt is not the harness rendered for this room');
  let index = 1;
  const expectSystem = (texts: string[]): string | undefined => {
    for (const text of texts) {
      const message = messages[index];
      if (message?.role !== 'system' || message.content !== text)
        return `expected the hook system message ${JSON.stringify(text.slice(0, 40))}`;
      index++;
    }
    return undefined;
  };
  const sessionProblem = expectSystem(injections.session_start.systemMessages);
  if (sessionProblem) return fail(index, sessionProblem);

  const entries: TimelineEntry[] = [];
  for (let turn = 0; index < messages.length; turn++) {
    const user = messages[index];
    if (user?.role !== 'user')
      return fail(index, `expected the viewer's turn ${turn + 1}, found a ${user?.role} message`);
    const text = stripSuffix(user.content, userSuffix(injections, turn));
    if (text === undefined) return fail(index, 'the user turn does not end with the hook suffixes the harness injects');
    entries.push({ kind: 'user', text, turn });
    index++;
    const injected = expectSystem([
      ...injections.user_message.systemMessages,
      ...injections.before_reply.systemMessages,
    ]);
    if (injected) return fail(index, injected);
    while (index < messages.length) {
      const message = messages[index];
      if (message?.role !== 'assistant') return fail(index, `expected a model step, found a ${message?.role} message`);
      entries.push({ kind: 'assistant', message, sourceIndex: index });
      index++;
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) break;
      for (const [position, call] of calls.entries()) {
        const result = messages[index];
        if (result?.role !== 'tool' || result.tool_call_id !== call.id)
          return fail(index, `expected the result of tool call ${call.id}`);
        const last = position === calls.length - 1;
        const content = last ? stripSuffix(result.content, injections.after_tool_result.userSuffix) : result.content;
        if (content === undefined)
          return fail(index, 'the last tool result does not end with the after_tool_result suffix');
        entries.push({ kind: 'tool', toolCallId: call.id, content, sourceIndex: index, lastOfBatch: last });
        index++;
      }
      const after = expectSystem(injections.after_tool_result.systemMessages);
      if (after) return fail(index, after);
    }
  }
  return { ok: true, timeline: { entries } };
}

/** How the parts the harness did not inject are carried into the rebuilt trajectory. */
export interface TimelineRewrite {
  userText(text: string): string;
  assistant(message: AssistantMessage): AssistantMessage;
  toolContent(toolCallId: string, content: string): string;
}

export const identityRewrite: TimelineRewrite = {
  userText: (text) => text,
  assistant: (message) => message,
  toolContent: (_id, content) => content,
};

/**
 * The messages of a timeline under `harness` and `context`, plus where each source message went.
 * `systemPrompt`, when the caller already rendered it for this harness and context, saves a render.
 */
export function rebuildTimeline(
  timeline: Timeline,
  harness: Harness,
  context: RenderContext,
  rewrite: TimelineRewrite = identityRewrite,
  systemPrompt = renderSystemPrompt(harness, context),
): { messages: ChatMessage[]; indexMap: Map<number, number> } {
  const injections = injectionsOf(harness, context);
  const messages: ChatMessage[] = [{ role: 'system', content: systemPrompt }];
  const indexMap = new Map<number, number>([[0, 0]]);
  const pushSystem = (texts: string[]) => {
    for (const content of texts) messages.push({ role: 'system', content });
  };
  pushSystem(injections.session_start.systemMessages);
  for (const entry of timeline.entries) {
    switch (entry.kind) {
      case 'user':
        messages.push({
          role: 'user',
          content: joinSuffix(rewrite.userText(entry.text), userSuffix(injections, entry.turn)),
        });
        pushSystem([...injections.user_message.systemMessages, ...injections.before_reply.systemMessages]);
        break;
      case 'assistant':
        indexMap.set(entry.sourceIndex, messages.length);
        messages.push(rewrite.assistant(entry.message));
        break;
      case 'tool': {
        indexMap.set(entry.sourceIndex, messages.length);
        const content = rewrite.toolContent(entry.toolCallId, entry.content);
        messages.push({
          role: 'tool',
          tool_call_id: entry.toolCallId,
          content: entry.lastOfBatch ? joinSuffix(content, injections.after_tool_result.userSuffix) : content,
        });
        if (entry.lastOfBatch) pushSystem(injections.after_tool_result.systemMessages);
        break;
      }
    }
  }
  return { messages, indexMap };
}
