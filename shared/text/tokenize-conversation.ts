import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import { locateAssistantSpans, markerCharacters, type CharSpan } from './assistant-spans';
import type { RenderOptions } from './chat-template';
import type { ChatTokenizer } from './chat-tokenizer';
import { normalizeHookMessages, type HookMessageForm, type HookNormalization } from './hook-messages';
import { stringifyJsonKeepingFloats } from './python-values';
import { rejection, type SampleRejection } from './sample-rejection';
import { trajectoryToTemplateInput, type TemplateMessage, type TemplateTool } from './template-input';

/** One conversation rendered by the target model's template, tokenized and loss-masked. */
export interface TokenizedSample {
  /** The full rendering by the chat template. */
  text: string;
  /** Token ids of `text`, equal to the tokenizer's own encoding of the whole text. */
  inputIds: number[];
  /** Per token: 1 = trained (assistant output incl. its end-of-turn token), 0 = context. */
  lossMask: number[];
  /**
   * The trained spans: character offsets in `text` (end exclusive) and token offsets in
   * `inputIds`; `messageIndex` counts in `messages`. `mergedPromptChars` > 0 when the served prompt
   * ends inside a token of the whole text (a thinking template's `<think>\n` before `\n</think>`):
   * the span then starts at that token, and its first characters are the prompt's last ones.
   */
  assistantSpans: Array<{
    start: number;
    end: number;
    tokenStart: number;
    tokenEnd: number;
    messageIndex: number;
    mergedPromptChars?: number;
  }>;
  /** The conversation as rendered: the input after hook normalization. */
  messages: ChatMessage[];
  /** Which hook normalization applied (see normalizeHookMessages). */
  hookMessages: HookNormalization;
}

export interface TokenizeOptions {
  /** Passed to the template as `enable_thinking` when set (Qwen3 family). */
  enableThinking?: boolean;
  /** Train every assistant turn, or only the last one. */
  trainOn: 'all' | 'last';
  /** What `strftime_now` formats. Default: the current time, fixed once per conversation. */
  now?: Date;
  /** How hook system messages reach the template; default the tokenizer's (probed or configured). */
  hookMessages?: HookMessageForm;
}

export type TokenizeResult = { ok: true; sample: TokenizedSample } | SampleRejection;

const reservedPatterns = new WeakMap<ChatTokenizer, RegExp | null>();
const sharedToolLists = new WeakMap<ChatTokenizer, Map<string, TemplateTool[]>>();
/** Distinct tool lists kept per tokenizer (a run has a few harness variants, each with one list). */
const sharedToolListLimit = 256;

/**
 * One list object per distinct tool list: conversations of the same harness then share the
 * template's converted tool values (ChatTemplate caches them by list identity).
 */
function sharedToolList(tokenizer: ChatTokenizer, tools: TemplateTool[]): TemplateTool[] {
  if (tools.length === 0) return tools;
  let lists = sharedToolLists.get(tokenizer);
  if (!lists) sharedToolLists.set(tokenizer, (lists = new Map()));
  // `1.0` and `1` render differently: the key tells them apart (JSON.stringify writes both `1`).
  const key = stringifyJsonKeepingFloats(tools);
  const known = lists.get(key);
  if (known) return known;
  if (lists.size >= sharedToolListLimit) lists.clear();
  lists.set(key, tools);
  return tools;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Special-token and end-of-turn texts: inside message data they would tokenize as control tokens. */
function reservedPattern(tokenizer: ChatTokenizer): RegExp | null {
  if (!reservedPatterns.has(tokenizer)) {
    const texts = [...new Set([...tokenizer.specialTokens, ...tokenizer.endOfTurnTokens])].filter(
      (text) => text !== '',
    );
    reservedPatterns.set(
      tokenizer,
      texts.length > 0
        ? new RegExp(
            texts
              .sort((a, b) => b.length - a.length)
              .map(escapeRegExp)
              .join('|'),
          )
        : null,
    );
  }
  return reservedPatterns.get(tokenizer)!;
}

function stringsOf(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) stringsOf(item, into);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      into.push(key);
      stringsOf(item, into);
    }
  }
  return into;
}

function findReservedText(
  tokenizer: ChatTokenizer,
  messages: TemplateMessage[],
  tools: unknown,
): SampleRejection | undefined {
  const pattern = reservedPattern(tokenizer);
  const check = (value: unknown, where: string, messageIndex?: number): SampleRejection | undefined => {
    for (const text of stringsOf(value)) {
      const match = pattern?.exec(text);
      if (match)
        return rejection(
          'RESERVED_TEXT',
          `${where} contains the special-token text ${JSON.stringify(match[0])}; it would tokenize as a control token`,
          messageIndex,
        );
      if (markerCharacters.test(text))
        return rejection(
          'RESERVED_TEXT',
          `${where} contains characters of Unicode planes 15-16, which span location reserves`,
          messageIndex,
        );
    }
    return undefined;
  };
  for (const [index, message] of messages.entries()) {
    const found = check(message, `message ${index} (${message.role})`, index);
    if (found) return found;
  }
  return check(tools, 'the tool definitions');
}

/**
 * Renders a conversation with the tokenizer's own chat template, tokenizes the whole text and
 * masks in the assistant turns' output (content, tool-call text, end-of-turn token; never the
 * header, never tool results). Every sample is verified: the piecewise tokenization at the span
 * boundaries must equal the whole-text tokenization, and each span's tokens must decode back to
 * exactly that span's text. A conversation that fails is returned as a rejection with its reason.
 * Hook system messages are first normalized for the template (normalizeHookMessages), so the
 * sample is what the model is served; `sample.messages` is the conversation as rendered.
 */
export function tokenizeConversation(
  tokenizer: ChatTokenizer,
  original: ChatMessage[],
  tools: ToolSpec[],
  options: TokenizeOptions,
): TokenizeResult {
  const normalized = normalizeHookMessages(original, options.hookMessages ?? tokenizer.hookMessages);
  if (!normalized.ok) return normalized;
  const { messages } = normalized;
  const assistantIndices = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
  if (assistantIndices.length === 0)
    return rejection('NO_ASSISTANT_TURN', 'the conversation has no assistant message to train on');
  const trained = options.trainOn === 'last' ? assistantIndices.slice(-1) : assistantIndices;
  if (!tokenizer.templateFeatures.rendersToolCalls) {
    const withCalls = trained.find(
      (index) => (messages[index] as Extract<ChatMessage, { role: 'assistant' }>).tool_calls?.length,
    );
    if (withCalls !== undefined) {
      return rejection(
        'TOOL_CALLS_NOT_RENDERED',
        `assistant message ${withCalls} has tool calls and the chat template ${tokenizer.templateLabel} never renders tool calls; pass a template that does`,
        withCalls,
      );
    }
  }

  const input = trajectoryToTemplateInput(messages, tools, tokenizer.templateFeatures);
  const reserved = findReservedText(tokenizer, input.messages, input.tools);
  if (reserved) return reserved;

  const renderOptions: RenderOptions = {
    tools: sharedToolList(tokenizer, input.tools),
    enableThinking: options.enableThinking,
    now: options.now ?? new Date(),
  };
  let text: string;
  try {
    text = tokenizer.render(input.messages, renderOptions);
  } catch (error) {
    return rejection('TEMPLATE_ERROR', `rendering the conversation: ${(error as Error).message}`);
  }

  const located = locateAssistantSpans({
    render: (templateMessages, templateOptions) => tokenizer.render(templateMessages, templateOptions),
    generationPrompt: (templateOptions) => tokenizer.generationPrompt(templateOptions),
    messages: input.messages,
    text,
    options: renderOptions,
    messageIndices: trained,
    endOfTurnTokens: tokenizer.endOfTurnTokens,
    addedTokens: tokenizer.addedTokens,
  });
  if (!located.ok) return located;

  const owners = new Map(
    located.spans.flatMap(
      (span: CharSpan) =>
        [
          [span.start, span.messageIndex],
          [span.end, span.messageIndex],
        ] as const,
    ),
  );
  const boundaries = [...owners.keys()].sort((a, b) => a - b);
  // One encode of the whole text; each span boundary must be a token boundary of it.
  const { ids: inputIds, tokenIndex: boundaryTokens } = tokenizer.encodeAt(text, boundaries);
  const tokenIndex = new Map<number, number>();
  const inside: number[] = [];
  for (const [position, boundary] of boundaries.entries()) {
    if (boundaryTokens[position] < 0) inside.push(boundary);
    else tokenIndex.set(boundary, boundaryTokens[position]);
  }
  const starts = new Map<number, { start: number; mergedPromptChars: number }>();
  if (inside.length > 0) {
    const merged = mergedTokenStarts(
      tokenizer,
      text,
      located.spans.filter((span) => inside.includes(span.start)),
      tokenIndex,
    );
    for (const [start, moved] of merged) {
      // Never into another trained span (a template that puts two assistant turns back to back).
      if (located.spans.some((other) => other.start !== start && other.end > moved.start && other.start < start))
        continue;
      starts.set(start, moved);
    }
    for (const boundary of inside) {
      if (starts.has(boundary) && !located.spans.some((span) => span.end === boundary)) continue;
      const owner = owners.get(boundary);
      const context = JSON.stringify(text.slice(Math.max(0, boundary - 12), boundary + 12));
      return rejection(
        'TOKEN_BOUNDARY',
        `the span boundary at character ${boundary} (${context}) of assistant message ${owner} falls inside a token of the whole-text tokenization`,
        owner,
      );
    }
  }

  const lossMask = new Array<number>(inputIds.length).fill(0);
  const assistantSpans: TokenizedSample['assistantSpans'] = [];
  for (const found of located.spans) {
    const moved = starts.get(found.start);
    const span = moved ? { ...found, start: moved.start } : found;
    const tokenStart = tokenIndex.get(span.start)!;
    const tokenEnd = tokenIndex.get(span.end)!;
    const decoded = tokenizer.decode(inputIds.slice(tokenStart, tokenEnd));
    const rendered = text.slice(span.start, span.end);
    const expected = tokenizer.normalize(rendered);
    // Decoding returns normalized text (NFC for Qwen), or undoes the normalizer (Gemma's `▁` for spaces).
    if (decoded !== expected && decoded !== rendered) {
      return rejection(
        'DECODE_MISMATCH',
        `the masked tokens of assistant message ${span.messageIndex} decode to ${JSON.stringify(decoded.slice(0, 80))}, not the rendered ${JSON.stringify(expected.slice(0, 80))}`,
        span.messageIndex,
      );
    }
    lossMask.fill(1, tokenStart, tokenEnd);
    assistantSpans.push({
      start: span.start,
      end: span.end,
      tokenStart,
      tokenEnd,
      messageIndex: span.messageIndex,
      ...(moved ? { mergedPromptChars: moved.mergedPromptChars } : {}),
    });
  }
  return {
    ok: true,
    sample: { text, inputIds, lossMask, assistantSpans, messages, hookMessages: normalized.normalization },
  };
}

/** How far back a span start may move into the served prompt's text (a merged token is a few characters). */
const mergedTokenReach = 32;

/**
 * Span starts that fall inside a token of the whole text, moved back to the start of that token:
 * the first token on which the whole text's tokenization and the served prompt's disagree, where
 * verl and TRL start the response too. Thinking templates need it: Qwen3.5 serves
 * `<|im_start|>assistant\n<think>\n` and renders the turn `<think>\n\n</think>\n\n...`, whose
 * `\n\n` is one token, so the model is trained to produce that token after `<think>`.
 *
 * Accepted only when, for each such start, (1) the token starts within the served prompt's text
 * in the rendering (`promptFrom`), so no earlier message's data becomes trained, and (2) the served
 * prompt's own tokenization has a token boundary at the same character, so every token before it
 * is one the model was served; otherwise the sample is refused with TOKEN_BOUNDARY as before.
 */
function mergedTokenStarts(
  tokenizer: ChatTokenizer,
  text: string,
  spans: CharSpan[],
  tokenIndex: Map<number, number>,
): Map<number, { start: number; mergedPromptChars: number }> {
  const starts = new Map<number, { start: number; mergedPromptChars: number }>();
  const candidates = spans.flatMap((span) => {
    const lowest = Math.max(span.promptFrom, span.start - mergedTokenReach);
    return Array.from({ length: span.start - lowest }, (_unused, step) => span.start - 1 - step);
  });
  if (candidates.length === 0) return starts;
  const unique = [...new Set(candidates)].sort((a, b) => a - b);
  const { tokenIndex: found } = tokenizer.encodeAt(text, unique);
  const tokenAt = new Map(unique.map((offset, position) => [offset, found[position]] as const));
  for (const span of spans) {
    let start: number | undefined;
    for (let offset = span.start - 1; offset >= Math.max(span.promptFrom, span.start - mergedTokenReach); offset--) {
      if (tokenAt.get(offset)! >= 0) {
        start = offset;
        break;
      }
    }
    if (start === undefined) continue;
    const promptCut = span.prompt.length - (span.start - start);
    if (tokenizer.encodeAt(span.prompt, [promptCut]).tokenIndex[0] < 0) continue;
    tokenIndex.set(start, tokenAt.get(start)!);
    starts.set(span.start, { start, mergedPromptChars: span.start - start });
  }
  return starts;
}

/** The rendered text with each trained span wrapped in `open`/`close`, for people reviewing masks. */
export function markTrainedText(sample: TokenizedSample, open = '⟦', close = '⟧'): string {
  let marked = '';
  let position = 0;
  for (const span of sample.assistantSpans) {
    marked += `${sample.text.slice(position, span.start)}${open}${sample.text.slice(span.start, span.end)}${close}`;
    position = span.end;
  }
  return marked + sample.text.slice(position);
}
