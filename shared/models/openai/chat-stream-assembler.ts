import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import type { AssistantMessage, ToolCall } from '../../trajectory/messages';
import type { FinishReason, StreamChunkEvent, TokenLogprob, Usage } from '../model-client';
import { badResponseError, streamErrorEvent, type EndpointContext } from '../model-errors';

/** What one streamed (or plain JSON) chat completion amounts to, with vLLM-bench timings. */
export interface AssembledChat {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Usage;
  logprobs?: TokenLogprob[];
  model: string;
  /** First choices-bearing chunk, ms after sending. */
  ttftMs: number;
  /** Last choices-bearing chunk, ms after sending. */
  e2eMs: number;
  /** Gaps between consecutive choices-bearing chunks, ms. */
  itlMs: number[];
  /** Choices-bearing chunks received. */
  chunkCount: number;
  /** First chunk with answer text (delta.content), ms after sending; absent without text. */
  firstContentMs?: number;
}

interface ToolCallDraft {
  id: string;
  name: string;
  arguments: string;
}

interface ChunkChoice {
  index?: number;
  delta?: {
    content?: string | null;
    reasoning_content?: string | null;
    reasoning?: string | null;
    tool_calls?: Array<{
      index?: number;
      id?: string | null;
      function?: { name?: string | null; arguments?: unknown };
    }> | null;
  };
  message?: {
    content?: string | null;
    reasoning_content?: string | null;
    reasoning?: string | null;
    tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: unknown } }> | null;
  };
  finish_reason?: string | null;
  logprobs?: { content?: RawLogprob[] | null } | null;
}

interface RawLogprob {
  token?: string;
  logprob?: number;
  bytes?: unknown;
  top_logprobs?: Array<{ token?: string; logprob?: number }>;
}

interface RawUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

interface RawChunk {
  id?: string;
  object?: string;
  model?: string;
  choices?: ChunkChoice[];
  usage?: RawUsage | null;
  error?: unknown;
}

/**
 * Turns an OpenAI `chat.completion.chunk` SSE stream into one assistant message. SSE framing is
 * eventsource-parser's (events split across network reads, CRLF, comments/keep-alives); this
 * class adds what the OpenAI stream means: tool calls assembled by `index` (id and name in the
 * first delta, arguments in fragments), reasoning deltas, the usage chunk with empty choices,
 * `[DONE]`, and the vLLM-bench clock (TTFT and ITL on choices-bearing chunks only).
 * Only choice 0 is read (requests never ask for n > 1).
 */
export class ChatStreamAssembler {
  private readonly parser: EventSourceParser;
  private content = '';
  private reasoning = '';
  private readonly toolCalls = new Map<number, ToolCallDraft>();
  private finishReasonRaw?: string;
  private rawUsage?: RawUsage;
  private readonly logprobs: TokenLogprob[] = [];
  private model = '';
  private responseId = '';
  private firstAt?: number;
  private lastAt?: number;
  private firstContentAt?: number;
  private readonly itl: number[] = [];
  private chunkCount = 0;
  private contentChunks = 0;
  private doneSeen = false;
  private currentAt = 0;

  constructor(
    private readonly context: EndpointContext,
    private readonly onChunk?: (chunk: StreamChunkEvent) => void,
  ) {
    this.parser = createParser({ onEvent: (event) => this.onEvent(event) });
  }

  /** True once `data: [DONE]` arrived. */
  get done(): boolean {
    return this.doneSeen;
  }

  /** True once choice 0 carried a finish_reason. */
  get finished(): boolean {
    return this.finishReasonRaw !== undefined;
  }

  /** Feeds decoded text that arrived `atMs` after the request was sent. */
  feed(text: string, atMs: number): void {
    this.currentAt = atMs;
    this.parser.feed(text);
  }

  /** Takes a non-streaming `chat.completion` body (servers that ignore `stream: true`). */
  acceptCompletion(bodyText: string, atMs: number): void {
    const body = this.parseJson(bodyText) as RawChunk;
    const choice = body.choices?.[0];
    if (!choice?.message) throw badResponseError(this.context, 'a chat.completion without choices[0].message');
    this.noteChunk(body, atMs);
    const message = choice.message;
    this.content = message.content ?? '';
    if (this.content !== '') this.firstContentAt = atMs;
    this.reasoning = message.reasoning_content ?? message.reasoning ?? '';
    (message.tool_calls ?? []).forEach((call, index) => {
      this.toolCalls.set(index, {
        id: call.id ?? '',
        name: call.function?.name ?? '',
        arguments: argumentText(call.function?.arguments),
      });
    });
    this.readLogprobs(choice);
    this.finishReasonRaw = choice.finish_reason ?? 'unknown';
    if (body.usage) this.rawUsage = body.usage;
    this.doneSeen = true;
  }

  /** The assembled result; throws MODEL_BAD_RESPONSE when no choices-bearing chunk arrived. */
  complete(): AssembledChat {
    if (this.firstAt === undefined || this.lastAt === undefined) {
      throw badResponseError(this.context, 'the stream carried no chunk with choices');
    }
    const toolCalls: ToolCall[] = [...this.toolCalls.entries()]
      .sort(([left], [right]) => left - right)
      .map(([index, draft]) => ({
        id: draft.id || `call_${this.responseId || 'response'}_${index}`,
        type: 'function' as const,
        function: { name: draft.name, arguments: draft.arguments },
      }));
    const message: AssistantMessage = {
      role: 'assistant',
      content: this.content === '' && toolCalls.length > 0 ? null : this.content,
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      ...(this.reasoning ? { reasoning_content: this.reasoning } : {}),
    };
    return {
      message,
      finishReason: finishReasonOf(this.finishReasonRaw),
      usage: this.usage(),
      ...(this.logprobs.length > 0 ? { logprobs: this.logprobs } : {}),
      model: this.model,
      ttftMs: this.firstAt,
      e2eMs: this.lastAt,
      itlMs: this.itl,
      chunkCount: this.chunkCount,
      ...(this.firstContentAt !== undefined ? { firstContentMs: this.firstContentAt } : {}),
    };
  }

  private usage(): Usage {
    const raw = this.rawUsage;
    if (raw && typeof raw.completion_tokens === 'number') {
      const cached = raw.prompt_tokens_details?.cached_tokens;
      return {
        promptTokens: raw.prompt_tokens ?? 0,
        completionTokens: raw.completion_tokens,
        ...(typeof cached === 'number' ? { cachedPromptTokens: cached } : {}),
      };
    }
    return { promptTokens: raw?.prompt_tokens ?? 0, completionTokens: this.contentChunks, estimated: true };
  }

  private onEvent(event: EventSourceMessage): void {
    const data = event.data.trim();
    if (data === '[DONE]') {
      this.doneSeen = true;
      return;
    }
    if (data === '') return;
    const chunk = this.parseJson(data) as RawChunk;
    if (chunk.error !== undefined || chunk.object === 'error' || event.event === 'error')
      throw streamErrorEvent(this.context, data);
    if (chunk.usage) this.rawUsage = chunk.usage;
    const choices = chunk.choices;
    if (!choices || choices.length === 0) return;
    // Loops rather than find/forEach callbacks: this runs for every chunk of every call.
    let choice: ChunkChoice | undefined;
    for (const candidate of choices) {
      if ((candidate.index ?? 0) === 0) {
        choice = candidate;
        break;
      }
    }
    this.noteChunk(chunk, this.currentAt);
    if (!choice) return;
    let delta = '';
    const text = choice.delta?.content;
    if (typeof text === 'string' && text !== '') {
      this.firstContentAt ??= this.currentAt;
      this.content += text;
      delta += text;
    }
    const reasoning = choice.delta?.reasoning_content ?? choice.delta?.reasoning;
    if (typeof reasoning === 'string' && reasoning !== '') {
      this.reasoning += reasoning;
      delta += reasoning;
    }
    const fragments = choice.delta?.tool_calls;
    if (fragments)
      for (let position = 0; position < fragments.length; position++)
        delta += this.addToolCallFragment(fragments[position], position);
    if (delta !== '') this.contentChunks++;
    this.readLogprobs(choice);
    if (choice.finish_reason) this.finishReasonRaw = choice.finish_reason;
    this.onChunk?.({ atMs: this.currentAt, ...(delta !== '' ? { contentDelta: delta } : {}) });
  }

  /** id and name come once per index (some servers repeat them); arguments are appended. */
  private addToolCallFragment(
    fragment: { index?: number; id?: string | null; function?: { name?: string | null; arguments?: unknown } },
    position: number,
  ): string {
    const index = typeof fragment.index === 'number' ? fragment.index : position;
    let draft = this.toolCalls.get(index);
    if (!draft) {
      draft = { id: '', name: '', arguments: '' };
      this.toolCalls.set(index, draft);
    }
    if (fragment.id && !draft.id) draft.id = fragment.id;
    const name = fragment.function?.name;
    if (name && name !== draft.name) draft.name += name;
    const argumentsFragment = argumentText(fragment.function?.arguments);
    draft.arguments += argumentsFragment;
    return argumentsFragment;
  }

  private noteChunk(chunk: RawChunk, atMs: number): void {
    if (!this.model && chunk.model) this.model = chunk.model;
    if (!this.responseId && chunk.id) this.responseId = chunk.id;
    if (this.firstAt === undefined) this.firstAt = atMs;
    else this.itl.push(atMs - (this.lastAt ?? atMs));
    this.lastAt = atMs;
    this.chunkCount++;
  }

  private readLogprobs(choice: ChunkChoice): void {
    const entries = choice.logprobs?.content;
    if (!entries) return;
    for (const entry of entries) {
      if (typeof entry.logprob !== 'number') continue;
      const read = tokenLogprob(entry.token ?? '', entry.logprob);
      if (Array.isArray(entry.bytes) && entry.bytes.every((byte) => Number.isInteger(byte)))
        read.bytes = entry.bytes as number[];
      if (entry.top_logprobs && entry.top_logprobs.length > 0) {
        read.top = entry.top_logprobs
          .filter((alternative) => typeof alternative.logprob === 'number')
          .map((alternative) => tokenLogprob(alternative.token ?? '', alternative.logprob as number));
      }
      this.logprobs.push(read);
    }
  }

  private parseJson(text: string): unknown {
    try {
      return JSON.parse(text);
    } catch {
      throw badResponseError(this.context, `invalid JSON in the stream: ${text.slice(0, 120)}`);
    }
  }
}

/**
 * vLLM's `return_tokens_as_token_ids` spells tokens `token_id:<id>`. Built as one literal: on
 * Node 20 every property added after a leading object spread (`{ ...fields, logprob }`) costs
 * about 2 µs, per token here.
 */
function tokenLogprob(token: string, logprob: number): TokenLogprob {
  const match = /^token_id:(\d+)$/.exec(token);
  return match ? { token, tokenId: Number(match[1]), logprob } : { token, logprob };
}

/** Arguments are a JSON string on the wire; a few servers send an object, kept as its JSON. */
function argumentText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return JSON.stringify(value);
}

function finishReasonOf(raw: string | undefined): FinishReason {
  switch (raw) {
    case 'stop':
    case 'length':
    case 'tool_calls':
    case 'content_filter':
    case 'error':
      return raw;
    case 'function_call':
      return 'tool_calls';
    case 'abort':
      return 'error';
    default:
      return 'unknown';
  }
}
