import type { RenderOptions } from './chat-template';
import { rejection, type SampleRejection } from './sample-rejection';
import { PythonFloat, PythonInteger } from './python-values';
import type { TemplateMessage } from './template-input';

/**
 * Finds, in the FULL rendering of a conversation, the text each assistant turn generated: from
 * the end of the generation header (`<|im_start|>assistant\n`) through the end-of-turn token.
 *
 * Prefix renderings cannot be used to cut the text: Qwen3 adds `<think>\n\n</think>\n\n` only to
 * assistant turns after the last user query, so a rendering of the first k messages is not a
 * prefix of the whole. Instead the whole conversation is rendered once more with private-use
 * marker characters around every string field (content, tool-call names, argument values), so
 * every branch of the template that depends on position stays the same, and the markers show
 * where each message's data lies. When the markers change what the template renders (it trims or
 * inspects content), each message is marked alone and its data located by difference. Prefix
 * renderings only tell what the model is served before a turn (the generation header); the cut
 * itself is always made in the full rendering.
 */

/** A character span of the full rendering, end exclusive. */
export interface CharSpan {
  messageIndex: number;
  start: number;
  end: number;
  /**
   * The served prompt the turn was generated after, and the lowest offset from which
   * `text.slice(promptFrom, start)` is how that prompt ends: the text the start may move back over
   * when it falls inside a token (see tokenizeConversation's merged-token boundary).
   */
  prompt: string;
  promptFrom: number;
}

/** Where a turn's generated text starts, and the served prompt text that precedes it in the rendering. */
interface GenerationStart {
  start: number;
  prompt: string;
  promptFrom: number;
}

type Render = (messages: TemplateMessage[], options: RenderOptions) => string;

export interface LocateRequest {
  render: Render;
  /** The template's static generation prompt for these options (ChatTemplate.generationPrompt), when it has one. */
  generationPrompt?: (options: RenderOptions) => string | undefined;
  messages: TemplateMessage[];
  /** The full rendering of `messages` with `options`. */
  text: string;
  options: RenderOptions;
  /** Indices of the assistant messages to locate, ascending. */
  messageIndices: number[];
  /** Texts that end an assistant turn. */
  endOfTurnTokens: string[];
  /** Texts of all added tokens (`<think>`, `<|im_start|>`, ...). */
  addedTokens: string[];
}

/** Supplementary private-use planes 15-16: never in tokenizers' own texts, rare in chat. */
const markerBase = 0xf0000;
const markerLimit = 0x10ffff;
export const markerCharacters = /[\u{F0000}-\u{10FFFF}]/u;
const markerCharactersGlobal = /[\u{F0000}-\u{10FFFF}]/gu;

type Region = { start: number; end: number };

interface Perturbation {
  message: TemplateMessage;
  /** Every marker placed in the message. */
  markers: string[];
  /** Fields that must reach the rendering whole: a label and the markers placed in it. */
  required: Array<{ field: string; markers: string[] }>;
}

class MarkerAllocator {
  private next = markerBase;
  /** Two fresh markers, or undefined when the planes are used up. */
  pair(): [string, string] | undefined {
    if (this.next + 1 > markerLimit) return undefined;
    return [String.fromCodePoint(this.next++), String.fromCodePoint(this.next++)];
  }
}

/** Wraps every string leaf of a value (keys stay as they are, so `tojson` output only gains markers). */
function wrapLeaves(value: unknown, markers: MarkerAllocator, placed: string[]): unknown {
  if (typeof value === 'string') {
    const pair = markers.pair();
    if (!pair) return value;
    placed.push(...pair);
    return `${pair[0]}${value}${pair[1]}`;
  }
  if (Array.isArray(value)) return value.map((item) => wrapLeaves(item, markers, placed));
  if (
    value !== null &&
    typeof value === 'object' &&
    !(value instanceof PythonFloat || value instanceof PythonInteger)
  ) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, wrapLeaves(item, markers, placed)]));
  }
  return value;
}

/** The same message with markers around each of its string fields. */
function perturb(message: TemplateMessage, markers: MarkerAllocator): Perturbation {
  const all: string[] = [];
  const required: Perturbation['required'] = [];
  const wrap = (value: unknown, field?: string): unknown => {
    const placed: string[] = [];
    const wrapped = wrapLeaves(value, markers, placed);
    all.push(...placed);
    if (field !== undefined && placed.length > 0) required.push({ field, markers: placed });
    return wrapped;
  };
  const result: TemplateMessage = { ...message };
  // The empty content of a tool-calling turn stays empty: templates test it (Qwen3 puts a newline
  // before the first call only when there is content), so markers there would change the
  // rendering and force one render per message; the calls' own markers locate the turn.
  if (typeof message.content === 'string' && !(message.content === '' && (message.tool_calls?.length ?? 0) > 0)) {
    result.content = wrap(message.content, message.content.trim() !== '' ? 'content' : undefined) as string;
  }
  // Not required: templates legitimately drop the reasoning of earlier turns.
  if (message.reasoning_content !== undefined) result.reasoning_content = wrap(message.reasoning_content) as string;
  if (message.tool_calls) {
    result.tool_calls = message.tool_calls.map((call, index) => {
      const label = `tool call ${index} (${call.function.name})`;
      return {
        ...call,
        function: {
          name: wrap(call.function.name, `${label} name`) as string,
          arguments: wrap(call.function.arguments, `${label} arguments`),
        },
      };
    });
  }
  return { message: result, markers: all, required };
}

function missingField(perturbation: Perturbation, found: (marker: string) => boolean): string | undefined {
  return perturbation.required.find((field) => !field.markers.every(found))?.field;
}

function isLowSurrogate(text: string, index: number): boolean {
  const code = text.charCodeAt(index);
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Where `text` and `other` differ, in `text`'s coordinates, never splitting a surrogate pair; null when equal. */
function changedRegion(text: string, other: string): Region | null {
  if (text === other) return null;
  let start = 0;
  while (start < text.length && start < other.length && text[start] === other[start]) start++;
  let suffix = 0;
  while (
    suffix < text.length - start &&
    suffix < other.length - start &&
    text[text.length - 1 - suffix] === other[other.length - 1 - suffix]
  )
    suffix++;
  let end = text.length - suffix;
  if (start > 0 && isLowSurrogate(text, start)) start--;
  if (end > start && end < text.length && isLowSurrogate(text, end)) end++;
  return { start, end };
}

function renderOrReject(
  render: Render,
  messages: TemplateMessage[],
  options: RenderOptions,
  messageIndex: number,
  what: string,
): string | SampleRejection {
  try {
    return render(messages, options);
  } catch (error) {
    return rejection('TEMPLATE_ERROR', `${what}: ${(error as Error).message}`, messageIndex);
  }
}

/** What the model is served before generating message `index`: the prompt and the header the generation prompt added. */
interface ServedPrompt {
  prompt: string;
  header: string;
}

function servedPrompt(request: LocateRequest, index: number, options: RenderOptions): ServedPrompt | SampleRejection {
  const prefix = request.messages.slice(0, index);
  const what = `rendering the prompt before assistant message ${index}`;
  const closed = renderOrReject(request.render, prefix, { ...options, addGenerationPrompt: false }, index, what);
  if (typeof closed !== 'string') return closed;
  // A static generation prompt is the same after any prefix: one render instead of two.
  const header = request.generationPrompt?.(options);
  if (header !== undefined) return { prompt: closed + header, header };
  const prompt = renderOrReject(request.render, prefix, { ...options, addGenerationPrompt: true }, index, what);
  if (typeof prompt !== 'string') return prompt;
  if (!prompt.startsWith(closed)) {
    return rejection(
      'GENERATION_PROMPT_MISMATCH',
      `the generation prompt before assistant message ${index} is not the conversation so far plus a header; the template is unusable for masking`,
      index,
    );
  }
  return { prompt, header: prompt.slice(closed.length) };
}

/**
 * Served prompts to try, in order: the one for the requested options, then the one with no
 * template switches, because a switch may add a prompt-side prefix (`enable_thinking=false` adds
 * an empty think block) that earlier turns do not carry.
 */
function servedPrompts(request: LocateRequest, index: number): ServedPrompt[] | SampleRejection {
  const requested = servedPrompt(request, index, request.options);
  if (!('prompt' in requested)) return requested;
  if (request.options.enableThinking === undefined) return [requested];
  const plain = servedPrompt(request, index, { ...request.options, enableThinking: undefined });
  if (!('prompt' in plain)) return plain;
  return plain.prompt === requested.prompt ? [requested] : [requested, plain];
}

/**
 * Where the turn's generated text starts: the last position `start` such that the template text
 * between the previous message's data (`lower`) and `start` is exactly how the served prompt ends,
 * header included. So Mistral's `[TOOL_CALLS]` and Qwen3's `<think>\n\n</think>\n\n` (rendered in
 * the turn, absent from the prompt) are trained, while DeepSeek-V3's `<｜tool▁outputs▁end｜>`
 * (in the prompt too) is not.
 */
function generationStart(
  text: string,
  prompts: ServedPrompt[],
  addedTokens: string[],
  lower: number,
  dataStart: number,
): GenerationStart | undefined {
  for (const { prompt, header } of prompts) {
    for (let start = dataStart; start - lower >= header.length; start--) {
      // An empty match would train the previous message's closing text; only allowed when there is none.
      if (start === lower && start !== dataStart) break;
      if (prompt.endsWith(text.slice(lower, start))) return { start, prompt, promptFrom: lower };
    }
  }
  return prefilledHeaderEnd(text, prompts, addedTokens, lower, dataStart);
}

/**
 * Thinking templates prefill the served header with a block that opens with a control token
 * (`<|im_start|>assistant\n<think>\n`, or `...<think>\n\n</think>\n\n` with thinking off) but
 * render earlier turns without it. Such a turn opens with the header cut just before that control
 * token: the last place between the previous message's data and this turn's data where the cut
 * header stands. Template text between it and the turn's data is output the model generated (the
 * `<tool_call>\n<function=` of a turn that holds only tool calls). A header cut anywhere else (a
 * dropped newline) is not accepted.
 */
function prefilledHeaderEnd(
  text: string,
  prompts: ServedPrompt[],
  addedTokens: string[],
  lower: number,
  dataStart: number,
): GenerationStart | undefined {
  for (const { prompt, header } of prompts) {
    for (let cut = header.length - 1; cut > 0; cut--) {
      if (!addedTokens.some((token) => header.startsWith(token, cut))) continue;
      const found = dataStart - cut >= lower ? text.lastIndexOf(header.slice(0, cut), dataStart - cut) : -1;
      if (found >= lower)
        return { start: found + cut, prompt: prompt.slice(0, prompt.length - header.length + cut), promptFrom: found };
    }
  }
  return undefined;
}

/**
 * Where each message's data lies in `text`, from ONE rendering with every message marked: valid
 * when that rendering minus the markers is exactly `text`, i.e. the markers changed no branch of
 * the template. Undefined when they did (a template that trims or inspects content).
 */
function regionsFromOneRendering(
  request: LocateRequest,
  wanted: Set<number>,
): Array<Region | null> | SampleRejection | undefined {
  const markers = new MarkerAllocator();
  const perturbations = request.messages.map((message) => perturb(message, markers));
  const rendered = renderOrReject(
    request.render,
    perturbations.map((perturbation) => perturbation.message),
    request.options,
    0,
    'rendering the conversation with markers',
  );
  if (typeof rendered !== 'string') return undefined;
  if (rendered.replace(markerCharactersGlobal, '') !== request.text) return undefined;
  const positions = new Map<string, number[]>();
  let removed = 0;
  for (const match of rendered.matchAll(markerCharactersGlobal)) {
    const list = positions.get(match[0]) ?? [];
    list.push(match.index - removed);
    positions.set(match[0], list);
    removed += match[0].length;
  }
  const regions: Array<Region | null> = [];
  for (const [index, perturbation] of perturbations.entries()) {
    if (wanted.has(index)) {
      const missing = missingField(perturbation, (marker) => positions.has(marker));
      if (missing)
        return rejection(
          'FIELD_NOT_RENDERED',
          `the chat template does not render the ${missing} of assistant message ${index}`,
          index,
        );
    }
    const found = perturbation.markers.flatMap((marker) => positions.get(marker) ?? []);
    regions.push(found.length > 0 ? { start: Math.min(...found), end: Math.max(...found) } : null);
  }
  return regions;
}

/** Where each message's data lies in `text`, by rendering once per message with only that message marked. */
function regionsByDifference(request: LocateRequest, wanted: Set<number>): Array<Region | null> | SampleRejection {
  const regions: Array<Region | null> = [];
  for (let index = 0; index < request.messages.length; index++) {
    const perturbation = perturb(request.messages[index], new MarkerAllocator());
    const variant = request.messages.slice();
    variant[index] = perturbation.message;
    const rendered = renderOrReject(
      request.render,
      variant,
      request.options,
      index,
      `rendering message ${index} with markers`,
    );
    if (typeof rendered !== 'string') return rendered;
    if (wanted.has(index)) {
      const missing = missingField(perturbation, (marker) => rendered.includes(marker));
      if (missing)
        return rejection(
          'FIELD_NOT_RENDERED',
          `the chat template does not render the ${missing} of assistant message ${index}`,
          index,
        );
    }
    regions.push(changedRegion(request.text, rendered));
  }
  return regions;
}

export function locateAssistantSpans(request: LocateRequest): { ok: true; spans: CharSpan[] } | SampleRejection {
  const { text, messages } = request;
  const wanted = new Set(request.messageIndices);
  const regions = regionsFromOneRendering(request, wanted) ?? regionsByDifference(request, wanted);
  if (!Array.isArray(regions)) return regions;

  const spans: CharSpan[] = [];
  for (const index of request.messageIndices) {
    const region = regions[index];
    if (!region)
      return rejection(
        'FIELD_NOT_RENDERED',
        `the chat template does not render assistant message ${index} at all`,
        index,
      );
    const others = regions.filter((other, otherIndex): other is Region => other !== null && otherIndex !== index);
    const lower = Math.max(0, ...others.filter((other) => other.end <= region.start).map((other) => other.end));
    const upper = Math.min(
      text.length,
      ...others.filter((other) => other.start >= region.end).map((other) => other.start),
    );

    const prompts = servedPrompts(request, index);
    if (!Array.isArray(prompts)) return prompts;
    const opening = generationStart(text, prompts, request.addedTokens, lower, region.start);
    if (opening === undefined) {
      return rejection(
        'HEADER_NOT_FOUND',
        `the generation header ${JSON.stringify(prompts[0].header)} does not open assistant message ${index} in the rendering; the template renders this turn unlike the prompt the model is served`,
        index,
      );
    }

    let end: number | undefined;
    for (const token of request.endOfTurnTokens) {
      const found = text.indexOf(token, region.end);
      if (found >= 0 && found + token.length <= upper && (end === undefined || found + token.length < end))
        end = found + token.length;
    }
    if (end === undefined) {
      return rejection(
        'NO_END_OF_TURN',
        `no end-of-turn token (${request.endOfTurnTokens.join(', ') || 'none known'}) follows assistant message ${index} in the rendering; the model would not learn to stop`,
        index,
      );
    }

    const { start, prompt, promptFrom } = opening;
    const span: CharSpan = { messageIndex: index, start, end, prompt, promptFrom };
    const overlapped = regions.findIndex(
      (other, otherIndex) =>
        other !== null &&
        otherIndex !== index &&
        ((other.start < span.end && other.end > span.start) ||
          (other.start === other.end && other.start > span.start && other.start < span.end)),
    );
    if (overlapped >= 0) {
      return rejection(
        'SPAN_OVERLAP',
        `the span of assistant message ${index} would include text of message ${overlapped} (${messages[overlapped].role})`,
        index,
      );
    }
    spans.push(span);
  }
  return { ok: true, spans };
}
