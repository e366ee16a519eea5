import type { ChatMessage, ToolSpec } from '../trajectory/messages';
import { locateAssistantSpans, markerCharacters, type CharSpan } from './assistant-spans';
import type { RenderOptions } from './chat-template';
import type { ChatTokenizer } from './chat-tokenizer';
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
  /** The trained spans: character offsets in `text` (end exclusive) and token offsets in `inputIds`. */
  assistantSpans: Array<{ start: number; end: number; tokenStart: number; tokenEnd: number; messageIndex: number }>;
}

export interface TokenizeOptions {
  /** Passed to the template as `enable_thinking` when set (Qwen3 family). */
  enableThinking?: boolean;
  /** Train every assistant turn, or only the last one. */
  trainOn: 'all' | 'last';
  /** What `strftime_now` formats. Default: the current time, fixed once per conversation. */
  now?: Date;
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
  const key = JSON.stringify(tools);
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
    const texts = [...new Set([...tokenizer.specialTokens, ...tokenizer.endOfTurnTokens])].filter((text) => text !== '');
    reservedPatterns.set(tokenizer, texts.length > 0 ? new RegExp(texts.sort((a, b) => b.length - a.length).map(escapeRegExp).join('|')) : null);
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

function findReservedText(tokenizer: ChatTokenizer, messages: TemplateMessage[], tools: unknown): SampleRejection | undefined {
  const pattern = reservedPattern(tokenizer);
  const check = (value: unknown, where: string, messageIndex?: number): SampleRejection | undefined => {
    for (const text of stringsOf(value)) {
      const match = pattern?.exec(text);
      if (match) return rejection('RESERVED_TEXT', `${where} contains the special-token text ${JSON.stringify(match[0])}; it would tokenize as a control token`, messageIndex);
      if (markerCharacters.test(text)) return rejection('RESERVED_TEXT', `${where} contains characters of Unicode planes 15-16, which span location reserves`, messageIndex);
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
 */
export function tokenizeConversation(tokenizer: ChatTokenizer, messages: ChatMessage[], tools: ToolSpec[], options: TokenizeOptions): TokenizeResult {
  const assistantIndices = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
  if (assistantIndices.length === 0) return rejection('NO_ASSISTANT_TURN', 'the conversation has no assistant message to train on');
  const trained = options.trainOn === 'last' ? assistantIndices.slice(-1) : assistantIndices;
  if (!tokenizer.templateFeatures.rendersToolCalls) {
    const withCalls = trained.find((index) => (messages[index] as Extract<ChatMessage, { role: 'assistant' }>).tool_calls?.length);
    if (withCalls !== undefined) {
      return rejection('TOOL_CALLS_NOT_RENDERED', `assistant message ${withCalls} has tool calls and the chat template of ${tokenizer.name} never renders tool calls; pass a template that does`, withCalls);
    }
  }

  const input = trajectoryToTemplateInput(messages, tools, tokenizer.templateFeatures);
  const reserved = findReservedText(tokenizer, input.messages, input.tools);
  if (reserved) return reserved;

  const renderOptions: RenderOptions = { tools: sharedToolList(tokenizer, input.tools), enableThinking: options.enableThinking, now: options.now ?? new Date() };
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

  const owners = new Map(located.spans.flatMap((span: CharSpan) => [[span.start, span.messageIndex], [span.end, span.messageIndex]] as const));
  const boundaries = [...owners.keys()].sort((a, b) => a - b);
  // One encode of the whole text; each span boundary must be a token boundary of it.
  const { ids: inputIds, tokenIndex: boundaryTokens } = tokenizer.encodeAt(text, boundaries);
  const tokenIndex = new Map<number, number>();
  for (const [position, boundary] of boundaries.entries()) {
    if (boundaryTokens[position] < 0) {
      const owner = owners.get(boundary);
      const context = JSON.stringify(text.slice(Math.max(0, boundary - 12), boundary + 12));
      return rejection('TOKEN_BOUNDARY', `the span boundary at character ${boundary} (${context}) of assistant message ${owner} falls inside a token of the whole-text tokenization`, owner);
    }
    tokenIndex.set(boundary, boundaryTokens[position]);
  }

  const lossMask = new Array<number>(inputIds.length).fill(0);
  const assistantSpans: TokenizedSample['assistantSpans'] = [];
  for (const span of located.spans) {
    const tokenStart = tokenIndex.get(span.start)!;
    const tokenEnd = tokenIndex.get(span.end)!;
    const decoded = tokenizer.decode(inputIds.slice(tokenStart, tokenEnd));
    const expected = tokenizer.normalize(text.slice(span.start, span.end));
    if (decoded !== expected) {
      return rejection('DECODE_MISMATCH', `the masked tokens of assistant message ${span.messageIndex} decode to ${JSON.stringify(decoded.slice(0, 80))}, not the rendered ${JSON.stringify(expected.slice(0, 80))}`, span.messageIndex);
    }
    lossMask.fill(1, tokenStart, tokenEnd);
    assistantSpans.push({ start: span.start, end: span.end, tokenStart, tokenEnd, messageIndex: span.messageIndex });
  }
  return { ok: true, sample: { text, inputIds, lossMask, assistantSpans } };
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
