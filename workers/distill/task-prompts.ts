import type { Harness } from '../../shared/harness/harness-types';
import { renderHarness, renderHookInjections } from '../../shared/harness/render';
import { renderContextOf } from '../../shared/simulator/room-context';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { createWorld } from '../../shared/simulator/world/world';
import type { ChatMessage, ToolSpec } from '../../shared/trajectory/messages';

/**
 * What a model sees at the first reply of a simulator task under a harness, built the way the
 * simulator's agent loop opens an episode: the rendered system prompt, `session_start` system
 * messages, the viewer's first message with the `session_start`, `user_message` and
 * `before_reply` hook suffixes, then those events' system messages; the harness's tools.
 */
export function taskFirstTurn(task: Task, harness: Harness): { messages: ChatMessage[]; tools: ToolSpec[] } {
  const context = renderContextOf(createWorld(task.room));
  const rendered = renderHarness(harness, context);
  const sessionStart = renderHookInjections(harness, 'session_start', context);
  const userMessage = renderHookInjections(harness, 'user_message', context);
  const beforeReply = renderHookInjections(harness, 'before_reply', context);
  const text = task.turns[0].message;
  const suffix = sessionStart.userSuffix + userMessage.userSuffix + beforeReply.userSuffix;
  const messages: ChatMessage[] = [
    { role: 'system', content: rendered.systemPrompt },
    ...sessionStart.systemMessages.map((content): ChatMessage => ({ role: 'system', content })),
    {
      role: 'user',
      content: suffix === '' ? text : suffix.startsWith('\n') ? `${text}${suffix}` : `${text}\n${suffix}`,
    },
    ...userMessage.systemMessages.map((content): ChatMessage => ({ role: 'system', content })),
    ...beforeReply.systemMessages.map((content): ChatMessage => ({ role: 'system', content })),
  ];
  return { messages, tools: rendered.tools };
}
