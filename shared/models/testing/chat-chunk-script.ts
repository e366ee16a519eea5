import type { Rng } from '../../random/rng';

/** A delay in ms: fixed, or drawn from a seeded distribution. */
export type DelaySpec =
  | number
  | { distribution: 'uniform'; minMs: number; maxMs: number }
  | { distribution: 'exponential'; meanMs: number }
  | { distribution: 'normal'; meanMs: number; stdMs: number };

/** Server-side pacing of a streamed response. */
export interface StreamTiming {
  /** Before the first chunk (prefill). Default 0. */
  ttftMs?: DelaySpec;
  /** Before every later choices-bearing chunk (decode). Default 0. */
  tokenDelayMs?: DelaySpec;
}

export interface ScriptedToolCall {
  /** Default `call_<request>_<index>`. */
  id?: string;
  name: string;
  /** Sent verbatim when a string (so tests can stream invalid JSON); JSON-encoded when an object. */
  arguments: string | Record<string, unknown>;
}

/** What the test server answers one chat request with. */
export interface ScriptedChatResponse {
  content?: string;
  /** Streamed as `reasoning_content` deltas before the content. */
  reasoning?: string;
  toolCalls?: ScriptedToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
  /** Default: JSON length of the request's messages / 4. */
  promptTokens?: number;
  cachedPromptTokens?: number;
  /** Characters (code points) per content/reasoning chunk; each chunk counts as one token. Default 4. */
  contentPieceChars?: number;
  /** Characters per tool-call argument fragment. Default 7. */
  argumentFragmentChars?: number;
  /** Alternate argument fragments of parallel tool calls instead of streaming one call after another. */
  interleaveToolCalls?: boolean;
  /** Logprob of each content piece, when the request asks for logprobs. Default: a fixed pattern. */
  logprobs?: number[];
  /**
   * Content as a model produced it, one token per chunk with its real logprob (a model-backed
   * responder). Replaces `content`, `contentPieceChars` and `logprobs`: the content is the
   * tokens' `text` joined.
   */
  contentTokens?: ScriptedContentToken[];
  /** Overrides the server's timing for this response. */
  timing?: StreamTiming;
  /**
   * Called as each stream event (chunks, then `[DONE]`) has been handed to the socket, with
   * whether it carried choices: when the server actually wrote it, which is later than its timing
   * asks for when the server's own event loop runs late (a test's truth is what the server did,
   * not what it meant to do).
   */
  onEventWritten?: (choices: boolean) => void;
  /** Model id reported. Default: the request's model. */
  model?: string;
}

/** One generated token of a model-backed response. */
export interface ScriptedContentToken {
  /** What this token adds to the content (may be '' for part of a multi-byte character or an end-of-turn token). */
  text: string;
  /** The token as the logprobs entry spells it (its own text, or `token_id:<id>`). */
  token: string;
  logprob: number;
  /** Most likely alternatives, best first. */
  top?: Array<{ token: string; logprob: number }>;
}

/** One SSE `data:` payload and the pause before it is written. */
export interface ScriptedChunk {
  delayMs: number;
  data: string;
  /** Whether the chunk carries choices (counts for TTFT/ITL and tokens). */
  choices: boolean;
}

export interface ChunkScriptContext {
  requestId: string;
  model: string;
  created: number;
  promptTokens: number;
  includeUsage: boolean;
  /** Top alternatives per token when the request set `logprobs: true` (0 = only the token). */
  topLogprobs?: number;
  timing: StreamTiming;
  rng: Rng;
}

/** Draws a delay; negative draws clamp to 0. */
export function drawDelay(spec: DelaySpec | undefined, rng: Rng): number {
  if (spec === undefined) return 0;
  if (typeof spec === 'number') return Math.max(0, spec);
  switch (spec.distribution) {
    case 'uniform':
      return spec.minMs + rng.next() * (spec.maxMs - spec.minMs);
    case 'exponential':
      return spec.meanMs > 0 ? rng.exponential(1 / spec.meanMs) : 0;
    case 'normal':
      return Math.max(0, rng.normal(spec.meanMs, spec.stdMs));
  }
}

/** Splits text into pieces of at most `size` code points (never inside a surrogate pair). */
export function splitPieces(text: string, size: number): string[] {
  const points = Array.from(text);
  const pieces: string[] = [];
  for (let start = 0; start < points.length; start += Math.max(1, size))
    pieces.push(points.slice(start, start + Math.max(1, size)).join(''));
  return pieces;
}

/** The completion tokens a scripted response streams (one per content, reasoning or argument piece). */
export function completionTokensOf(script: ScriptedChatResponse): number {
  const pieceSize = script.contentPieceChars ?? 4;
  const fragmentSize = script.argumentFragmentChars ?? 7;
  return (
    splitPieces(script.reasoning ?? '', pieceSize).length +
    contentPiecesOf(script).length +
    (script.toolCalls ?? []).reduce((sum, call) => sum + 1 + splitPieces(argumentsOf(call), fragmentSize).length, 0)
  );
}

function argumentsOf(call: ScriptedToolCall): string {
  return typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments);
}

function defaultLogprob(index: number): number {
  return -0.05 - (index % 7) * 0.15;
}

/**
 * The content's chunks with their logprob entries (top alternatives cut to `topLogprobs`). Entries
 * are built only when asked for: most requests want none, and at zero model delay the server's
 * own CPU time competes with the client a benchmark measures.
 */
function contentPiecesOf(
  script: ScriptedChatResponse,
  topLogprobs = 0,
): Array<{ text: string; entry: () => Record<string, unknown> }> {
  if (script.contentTokens) {
    return script.contentTokens.map((token) => ({
      text: token.text,
      entry: () => ({
        token: token.token,
        logprob: token.logprob,
        bytes: [...Buffer.from(token.token, 'utf8')],
        top_logprobs: (token.top ?? [])
          .slice(0, topLogprobs)
          .map((alternative) => ({ ...alternative, bytes: [...Buffer.from(alternative.token, 'utf8')] })),
      }),
    }));
  }
  return splitPieces(script.content ?? '', script.contentPieceChars ?? 4).map((piece, index) => ({
    text: piece,
    entry: () => logprobEntry(piece, script.logprobs?.[index] ?? defaultLogprob(index), topLogprobs),
  }));
}

function contentOf(script: ScriptedChatResponse): string | undefined {
  return script.contentTokens ? script.contentTokens.map((token) => token.text).join('') : script.content;
}

/**
 * The exact chunk sequence a streaming OpenAI server sends: a role chunk, reasoning and content
 * pieces, tool calls (id, type and name in the first delta of an index, then argument
 * fragments), a finish_reason chunk, the usage chunk with `choices: []` when asked for, and
 * `[DONE]`.
 */
export function buildChatChunks(script: ScriptedChatResponse, context: ChunkScriptContext): ScriptedChunk[] {
  const pieceSize = script.contentPieceChars ?? 4;
  const fragmentSize = script.argumentFragmentChars ?? 7;
  const toolCalls = script.toolCalls ?? [];
  // One literal per chunk rather than `{ ...head, choices }`: on Node 20 a property added after a
  // leading spread costs about 1 µs, per chunk of every answer.
  const chunkJson = (choices: unknown[], usage?: Record<string, unknown>): string =>
    JSON.stringify({
      id: context.requestId,
      object: 'chat.completion.chunk',
      created: context.created,
      model: context.model,
      choices,
      usage,
    });
  const chunks: ScriptedChunk[] = [];
  let tokens = 0;
  const push = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}): void => {
    const delayMs = drawDelay(chunks.length === 0 ? context.timing.ttftMs : context.timing.tokenDelayMs, context.rng);
    const choice = { index: 0, delta, logprobs: null, finish_reason: null, ...extra };
    chunks.push({ delayMs, data: chunkJson([choice]), choices: true });
  };

  push({ role: 'assistant', content: '' });
  for (const piece of splitPieces(script.reasoning ?? '', pieceSize)) {
    push({ reasoning_content: piece });
    tokens++;
  }
  for (const piece of contentPiecesOf(script, context.topLogprobs)) {
    push({ content: piece.text }, context.topLogprobs === undefined ? {} : { logprobs: { content: [piece.entry()] } });
    tokens++;
  }

  const fragmentsPerCall = toolCalls.map((call) => splitPieces(argumentsOf(call), fragmentSize));
  const opening = (index: number): Record<string, unknown> => ({
    tool_calls: [
      {
        index,
        id: toolCalls[index]?.id ?? `call_${context.requestId}_${index}`,
        type: 'function',
        function: { name: toolCalls[index]?.name, arguments: '' },
      },
    ],
  });
  const fragment = (index: number, text: string): Record<string, unknown> => ({
    tool_calls: [{ index, function: { arguments: text } }],
  });
  if (script.interleaveToolCalls) {
    toolCalls.forEach((_, index) => push(opening(index)));
    const longest = Math.max(0, ...fragmentsPerCall.map((fragments) => fragments.length));
    for (let position = 0; position < longest; position++) {
      fragmentsPerCall.forEach((fragments, index) => {
        const text = fragments[position];
        if (text !== undefined) push(fragment(index, text));
      });
    }
  } else {
    fragmentsPerCall.forEach((fragments, index) => {
      push(opening(index));
      for (const text of fragments) push(fragment(index, text));
    });
  }
  tokens += fragmentsPerCall.reduce((sum, fragments) => sum + 1 + fragments.length, 0);

  push({}, { finish_reason: script.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop') });
  if (context.includeUsage) {
    const usage = usageOf(context.promptTokens, tokens, script.cachedPromptTokens);
    chunks.push({ delayMs: 0, data: chunkJson([], usage), choices: false });
  }
  chunks.push({ delayMs: 0, data: '[DONE]', choices: false });
  return chunks;
}

/** The same response as one `chat.completion` body (for `stream: false`). */
export function buildChatCompletion(
  script: ScriptedChatResponse,
  context: ChunkScriptContext,
): Record<string, unknown> {
  const toolCalls = (script.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_${context.requestId}_${index}`,
    type: 'function',
    function: { name: call.name, arguments: argumentsOf(call) },
  }));
  const content = contentOf(script);
  return {
    id: context.requestId,
    object: 'chat.completion',
    created: context.created,
    model: context.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content ?? (toolCalls.length > 0 ? null : ''),
          ...(script.reasoning ? { reasoning_content: script.reasoning } : {}),
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        logprobs:
          context.topLogprobs === undefined
            ? null
            : { content: contentPiecesOf(script, context.topLogprobs).map((piece) => piece.entry()) },
        finish_reason: script.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
      },
    ],
    usage: usageOf(context.promptTokens, completionTokensOf(script), script.cachedPromptTokens),
  };
}

function usageOf(
  promptTokens: number,
  completionTokens: number,
  cachedTokens: number | undefined,
): Record<string, unknown> {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    ...(cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: cachedTokens } } : {}),
  };
}

/** OpenAI logprob entry; alternatives are placeholder tokens ranked below the emitted one. */
function logprobEntry(token: string, logprob: number, top: number): Record<string, unknown> {
  const bytes = [...Buffer.from(token, 'utf8')];
  const alternatives = Array.from({ length: Math.max(0, top - 1) }, (_, rank) => {
    const alternative = `<alt${rank + 1}>`;
    return { token: alternative, logprob: logprob - (rank + 1), bytes: [...Buffer.from(alternative)] };
  });
  return { token, logprob, bytes, top_logprobs: top > 0 ? [{ token, logprob, bytes }, ...alternatives] : [] };
}
