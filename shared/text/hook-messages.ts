import type { ChatMessage } from '../trajectory/messages';
import type { RenderOptions } from './chat-template';
import { rejection, type SampleRejection } from './sample-rejection';
import type { TemplateMessage } from './template-input';

/**
 * How hook injections (system messages after the first turn) reach a template:
 * - `system-messages`: as they are; the template renders a system turn anywhere (Qwen3, Llama 3.1).
 * - `folded`: each such message becomes a marked block (`hookBlock`) inside the turn the model
 *   reads before its next reply; for templates that refuse or drop a system message that is not
 *   first (Qwen3.5 raises "System message must be at the beginning").
 */
export type HookMessageForm = 'system-messages' | 'folded';

/** What a sample's conversation went through before rendering; recorded per sample. */
export interface HookNormalization {
  form: HookMessageForm;
  /** System messages folded into neighbouring turns (0 when none were, or the form keeps them). */
  folded: number;
}

const blockOpen = '<system-reminder>';
const blockClose = '</system-reminder>';

/** The marked block a folded hook message becomes; the hooks family's `reminder_block` placement renders the same text. */
export function hookBlock(text: string): string {
  return `${blockOpen}\n${text}\n${blockClose}`;
}

/** A turn's text without the hook blocks appended to it (a tool result's JSON before its reminders). */
export function withoutHookBlocks(text: string): string {
  let result = text;
  for (;;) {
    if (!result.endsWith(blockClose)) return result;
    const start = result.lastIndexOf(`\n${blockOpen}\n`);
    if (start < 0) return result;
    result = result.slice(0, start);
  }
}

/** Text of a turn with blocks appended after it, one per line, as hook suffixes join (`render.ts`). */
function appendBlocks(content: string, blocks: string[]): string {
  return [content, ...blocks].join('\n');
}

/**
 * The conversation as a template of form `form` accepts it, the one function every path that
 * renders for a target model calls (shard, rl token views, distill and served prompts, replay),
 * so training sees exactly what serving sends.
 *
 * With `folded`, a system message that is not at the start (a hook injection) is folded into the
 * turn the model reads before its next reply: appended to the preceding user turn or tool result
 * when it follows one (a `user_message`, `before_reply` or `after_tool_result` hook), else
 * prepended to the following user turn (a second system message at session start). Several in a
 * row keep their order. One that has neither neighbour (between two assistant turns) is refused
 * with HOOK_NOT_FOLDABLE rather than moved somewhere the model would read it at another time.
 */
export function normalizeHookMessages(
  messages: readonly ChatMessage[],
  form: HookMessageForm,
): { ok: true; messages: ChatMessage[]; normalization: HookNormalization } | SampleRejection {
  if (form === 'system-messages') return { ok: true, messages: [...messages], normalization: { form, folded: 0 } };
  const result: ChatMessage[] = [];
  let pending: Array<{ index: number; block: string }> = [];
  let folded = 0;
  const flushInto = (message: ChatMessage, where: 'before' | 'after'): ChatMessage => {
    const blocks = pending.map((entry) => entry.block);
    folded += blocks.length;
    pending = [];
    const content = message.content ?? '';
    return {
      ...message,
      content: where === 'after' ? appendBlocks(content, blocks) : appendBlocks(blocks.join('\n'), [content]),
    };
  };
  for (const [index, message] of messages.entries()) {
    const atStart = index === 0 && message.role === 'system';
    if (message.role === 'system' && !atStart) {
      pending.push({ index, block: hookBlock(message.content) });
      continue;
    }
    if (pending.length > 0) {
      const previous = result.at(-1);
      if (previous && (previous.role === 'user' || previous.role === 'tool'))
        result[result.length - 1] = flushInto(previous, 'after');
      else if (message.role === 'user') {
        result.push(flushInto(message, 'before'));
        continue;
      } else return notFoldable(pending[0].index);
    }
    result.push(message);
  }
  if (pending.length > 0) {
    const previous = result.at(-1);
    if (!previous || (previous.role !== 'user' && previous.role !== 'tool')) return notFoldable(pending[0].index);
    result[result.length - 1] = flushInto(previous, 'after');
  }
  return { ok: true, messages: result, normalization: { form, folded } };
}

function notFoldable(index: number): SampleRejection {
  return rejection(
    'HOOK_NOT_FOLDABLE',
    `system message ${index} stands between two assistant turns and the chat template accepts system messages only first; there is no user turn or tool result to fold it into`,
    index,
  );
}

type Render = (messages: TemplateMessage[], options: RenderOptions) => string;

const probeHook = 'hat probe hook';

/**
 * Where a template puts a system message that is not first: `anywhere` (a system turn where it
 * stands: Qwen3, Llama 3.1), `moved-to-start` (rendered, but before the first user turn:
 * DeepSeek-V3.1 joins all system messages at the top), `dropped`, or `refused` (the template
 * raises: Qwen3.5). Found by rendering a probe conversation.
 */
export type SystemMessagePlacement = 'anywhere' | 'moved-to-start' | 'dropped' | 'refused';

export function probeSystemMessagePlacement(render: Render): SystemMessagePlacement {
  const messages: TemplateMessage[] = [
    { role: 'system', content: 'probe system' },
    { role: 'user', content: 'probe question' },
    { role: 'assistant', content: 'probe answer' },
    { role: 'user', content: 'probe follow-up' },
    { role: 'system', content: probeHook },
    { role: 'assistant', content: 'probe second answer' },
  ];
  let text: string;
  try {
    text = render(messages, {});
  } catch {
    return 'refused';
  }
  const at = text.indexOf(probeHook);
  if (at < 0) return 'dropped';
  return at > text.indexOf('probe follow-up') ? 'anywhere' : 'moved-to-start';
}

/** The hook form a template needs: as system messages only where it renders them in place, else folded. */
export function hookMessageFormFor(placement: SystemMessagePlacement): HookMessageForm {
  return placement === 'anywhere' ? 'system-messages' : 'folded';
}
