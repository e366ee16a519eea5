import { HatError } from '../../errors';
import type { ChatTokenizer } from '../../text/chat-tokenizer';
import { renderContinuation } from '../../text/render-continuation';
import { tokenizeConversation } from '../../text/tokenize-conversation';
import { renderServedPrompt } from '../../text/served-prompt';
import type { MalformedToolCall, ToolCallParseResult } from '../../text/tool-parsers/tool-call-parser';
import type { AssistantMessage, ChatMessage, ToolCall, ToolSpec } from '../../trajectory/messages';
import type { ChatRequest, ChatResponse, ModelClient, SamplingSettings } from '../model-client';
import type { LogprobDistribution, SamplingOfTurn } from './logprob-distribution';
import type { TokenSampler } from './token-sampler';

/**
 * The template's tool-call format read from a turn's generated text (reasoning already split
 * off): `shared/text/tool-parsers`. Malformed calls stay in `content` verbatim and are listed.
 */
export type TurnTextParser = (text: string, tools: readonly ToolSpec[]) => ToolCallParseResult;

/** For templates without a tool-call format: all text is content. */
export const plainTextParser: TurnTextParser = (text) => ({
  content: text.trim() === '' ? null : text,
  toolCalls: [],
  malformed: [],
});

/** One assistant turn as sampled. `prompt ids` are `tokens[0 : promptLength]` of the episode (the sequence only grows). */
export interface TokenExactTurn {
  /** Length of the prompt this turn was sampled from: a prefix of the episode's `tokens`. */
  promptLength: number;
  sampledIds: number[];
  /** One per sampled id, of the episode's `distribution`. */
  logprobs: number[];
  finishReason: 'stop' | 'length';
  /** Seed sent with this turn. */
  seed: number;
  /** Tool-call text the template's parser could not read, with why (kept in the message content; the verifier penalizes it). */
  malformed: MalformedToolCall[];
  toolCalls: number;
}

/** Whether a fresh render of the finished conversation gives the as-sampled ids. */
export interface EpisodeDrift {
  /** False when the fresh render itself failed (`reason` says why). */
  checked: boolean;
  drifted: boolean;
  /** First token index where they differ, null when equal. */
  firstDifference: number | null;
  /** Tokens after the common prefix, on the longer side (0 when equal). */
  tokens: number;
  reason?: string;
}

/** An episode's token view as sampled: the training sequence, its loss mask and the rollout logprobs. */
export interface TokenExactEpisodeView {
  tokenExact: true;
  /** Prompt + every sampled id + every environment id, in order. */
  tokens: number[];
  /** Over `tokens`: 1 exactly on sampled ids. */
  lossMask: number[];
  /** Over `tokens`: the rollout logprob of each sampled id, 0 elsewhere. */
  rolloutLogprobs: number[];
  /** Length of the first turn's prompt. */
  promptLength: number;
  turns: TokenExactTurn[];
  distribution: LogprobDistribution | null;
  drift: EpisodeDrift;
}

export interface TokenExactEpisodeOptions {
  sampler: TokenSampler;
  tokenizer: ChatTokenizer;
  parse: TurnTextParser;
  /** Sampling of every turn; the request's own temperature/topP/topK win when given. */
  sampling: SamplingOfTurn;
  /** New tokens per turn when the request gives no maxTokens. Default 1024. */
  maxTokens?: number;
  /** Episode seed; turn i is sampled with (seed + i) mod 2^31. */
  seed: number;
  enableThinking?: boolean;
  /** What `strftime_now` formats (fixed, so the same episode gives the same ids). */
  now: Date;
}

const seedModulus = 0x80000000;

/**
 * One multi-turn episode sampled token-exact, as a ModelClient the agent loop drives: the first
 * call renders the conversation with the model's chat template and tokenizer; every later call
 * appends the environment's messages tokenized as the template renders that continuation
 * (`renderContinuation`) to the previous prompt + sampled ids, so one token sequence grows and
 * the policy always continues exactly what it produced. Tool calls are parsed from the generated
 * text by the template's parser; unparseable tool-call text stays in the content and is recorded
 * per turn as malformed. `view()` gives the sequence, loss mask, rollout logprobs and the drift
 * against a fresh full render.
 */
export class TokenExactEpisode implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider: string;
  readonly modelId: string;
  readonly simulated: boolean;
  readonly sampling: SamplingSettings;
  private readonly tokens: number[] = [];
  private readonly lossMask: number[] = [];
  private readonly rolloutLogprobs: number[] = [];
  private readonly turns: TokenExactTurn[] = [];
  private readonly stopTokenIds: number[];
  private distribution: LogprobDistribution | null = null;
  private lastMessages: ChatMessage[] = [];
  private lastTools: ToolSpec[] = [];

  constructor(private readonly options: TokenExactEpisodeOptions) {
    this.provider = options.sampler.engine;
    this.modelId = options.sampler.modelId;
    this.simulated = options.sampler.dummyWeights;
    this.sampling = {
      ...options.sampling,
      seed: options.seed,
      ...(options.maxTokens !== undefined ? { maxTokens: options.maxTokens } : {}),
    };
    this.stopTokenIds = stopTokenIdsOf(options.tokenizer);
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const { tokenizer } = this.options;
    const tools = request.tools ?? [];
    if (this.turns.length === 0) {
      const { text } = renderServedPrompt(tokenizer, request.messages, tools, {
        enableThinking: this.options.enableThinking,
        now: this.options.now,
      });
      this.append(tokenizer.encode(text), 0);
    } else {
      const previous = this.turns[this.turns.length - 1];
      // A turn cut by maxTokens has no end-of-turn id: the template closes it, outside the loss mask.
      if (previous.finishReason === 'length' && this.stopTokenIds[0] !== undefined)
        this.append([this.stopTokenIds[0]], 0);
      const rendered = renderContinuation(tokenizer, request.messages, tools, {
        enableThinking: this.options.enableThinking,
        now: this.options.now,
      });
      if (!rendered.ok)
        throw new HatError(
          'TOKEN_EXACT_CONTINUATION',
          `token-exact episode: the environment's continuation after turn ${this.turns.length} could not be rendered: [${rendered.code}] ${rendered.reason}`,
        );
      this.append(rendered.continuation.ids, 0);
    }
    const promptLength = this.tokens.length;
    const sampling: SamplingOfTurn = {
      temperature: request.temperature ?? this.options.sampling.temperature,
      topP: request.topP ?? this.options.sampling.topP,
      topK:
        request.topK !== undefined && request.topK > 0
          ? request.topK
          : request.topK === undefined
            ? this.options.sampling.topK
            : 0,
    };
    const seed = (this.options.seed + this.turns.length) % seedModulus;
    const sampled = await this.options.sampler.sample({
      promptIds: this.tokens.slice(),
      sampling,
      maxTokens: request.maxTokens ?? this.options.maxTokens ?? 1024,
      seed,
      stopTokenIds: this.stopTokenIds,
      ...(request.signal ? { signal: request.signal } : {}),
    });
    if (sampled.logprobs.length !== sampled.tokenIds.length) {
      throw new HatError(
        'TOKEN_EXACT_BAD_RESPONSE',
        `${this.options.sampler.location} returned ${sampled.tokenIds.length} token ids but ${sampled.logprobs.length} logprobs`,
      );
    }
    this.distribution ??= sampled.distribution;
    this.tokens.push(...sampled.tokenIds);
    this.lossMask.push(...sampled.tokenIds.map(() => 1));
    this.rolloutLogprobs.push(...sampled.logprobs);

    const ended =
      sampled.tokenIds.length > 0 && this.stopTokenIds.includes(sampled.tokenIds[sampled.tokenIds.length - 1]);
    const textIds = ended ? sampled.tokenIds.slice(0, -1) : sampled.tokenIds;
    const { message, malformed, toolCalls } = this.assistantMessage(
      tokenizer.decode(textIds),
      tools,
      request.messages.length,
    );
    this.turns.push({
      promptLength,
      sampledIds: sampled.tokenIds,
      logprobs: sampled.logprobs,
      finishReason: sampled.finishReason,
      seed,
      malformed,
      toolCalls,
    });
    this.lastMessages = [...request.messages, message];
    this.lastTools = tools;
    return {
      message,
      finishReason: toolCalls > 0 ? 'tool_calls' : sampled.finishReason,
      usage: {
        promptTokens: promptLength,
        completionTokens: sampled.tokenIds.length,
        ...(sampled.cachedPromptTokens !== undefined ? { cachedPromptTokens: sampled.cachedPromptTokens } : {}),
      },
      timings: { startedAt: sampled.startedAt, queueMs: 0, ttftMs: sampled.e2eMs, e2eMs: sampled.e2eMs },
      logprobs: sampled.tokenIds.map((tokenId, index) => ({
        token: tokenizer.decode([tokenId]),
        tokenId,
        logprob: sampled.logprobs[index],
      })),
      model: this.modelId,
      attempts: 1,
    };
  }

  /** The episode's token view as sampled, with the drift against a fresh render of `messages` (default: the conversation as of the last turn). */
  view(messages: ChatMessage[] = this.lastMessages, tools: ToolSpec[] = this.lastTools): TokenExactEpisodeView {
    return {
      tokenExact: true,
      tokens: this.tokens.slice(),
      lossMask: this.lossMask.slice(),
      rolloutLogprobs: this.rolloutLogprobs.slice(),
      promptLength: this.turns[0]?.promptLength ?? this.tokens.length,
      turns: this.turns.map((turn) => ({ ...turn })),
      distribution: this.distribution,
      drift:
        this.turns.length === 0
          ? { checked: false, drifted: false, firstDifference: null, tokens: 0, reason: 'no turn was sampled' }
          : measureDrift(this.options.tokenizer, messages, tools, this.tokens, {
              ...this.options,
              // A last turn cut by maxTokens has no end-of-turn id; a fresh render closes it.
              unclosedLastTurn: this.turns[this.turns.length - 1].finishReason === 'length' ? this.stopTokenIds : [],
            }),
    };
  }

  private append(ids: readonly number[], mask: 0 | 1): void {
    this.tokens.push(...ids);
    for (let index = 0; index < ids.length; index++) {
      this.lossMask.push(mask);
      this.rolloutLogprobs.push(0);
    }
  }

  /** The assistant message of a turn's text: reasoning split off, tool calls parsed by the template's parser. */
  private assistantMessage(
    text: string,
    tools: readonly ToolSpec[],
    messageIndex: number,
  ): { message: AssistantMessage; malformed: MalformedToolCall[]; toolCalls: number } {
    const { reasoning, rest } = splitReasoning(text, this.options.tokenizer);
    const parsed = this.options.parse(rest, tools);
    const toolCalls: ToolCall[] = parsed.toolCalls.map((call, index) => ({
      ...call,
      id: call.id || `call-${messageIndex}-${index}`,
    }));
    // Unreadable tool-call text stays in the content (the parser keeps it verbatim): the verifier sees and penalizes it.
    const message: AssistantMessage = {
      role: 'assistant',
      content: parsed.content ?? (toolCalls.length > 0 ? null : ''),
    };
    if (toolCalls.length > 0) message.tool_calls = toolCalls;
    if (reasoning !== undefined) message.reasoning_content = reasoning;
    return { message, malformed: parsed.malformed, toolCalls: toolCalls.length };
  }
}

/** The ids that end an assistant turn (the tokenizer's end-of-turn texts, each one token). */
export function stopTokenIdsOf(tokenizer: ChatTokenizer): number[] {
  const ids = tokenizer.endOfTurnTokens
    .map((text) => tokenizer.encode(text))
    .filter((encoded) => encoded.length === 1)
    .map((encoded) => encoded[0]);
  if (ids.length === 0)
    throw new HatError(
      'TOKEN_EXACT_NO_STOP_TOKEN',
      `the tokenizer ${tokenizer.name} has no single-token end-of-turn text (eos_token or generation_config eos_token_id); token-exact sampling cannot tell where a turn ends`,
    );
  return [...new Set(ids)];
}

/** Reasoning templates (a `</think>` token): the text before `</think>` is reasoning, the rest the reply. */
function splitReasoning(text: string, tokenizer: ChatTokenizer): { reasoning?: string; rest: string } {
  if (!tokenizer.addedTokens.includes('</think>')) return { rest: text };
  const close = text.indexOf('</think>');
  if (close < 0) return { rest: text };
  const reasoning = text
    .slice(0, close)
    .replace(/^\s*<think>/, '')
    .replace(/^\n+|\n+$/g, '');
  return { reasoning, rest: text.slice(close + '</think>'.length).replace(/^\n+/, '') };
}

/**
 * Compares the as-sampled ids with a fresh render of the finished conversation (every assistant
 * turn as parsed), up to the end of the last assistant turn. They differ when the template
 * re-renders earlier turns (Qwen3 drops old reasoning), when parsed tool calls render unlike the
 * sampled text, or when tokenizing pieces differs from tokenizing the whole. `unclosedLastTurn`:
 * the end-of-turn ids, when the last turn was cut by maxTokens: the one the fresh render adds
 * after it is not drift (nothing was sampled there).
 */
export function measureDrift(
  tokenizer: ChatTokenizer,
  messages: ChatMessage[],
  tools: ToolSpec[],
  sampled: readonly number[],
  options: { enableThinking?: boolean; now: Date; unclosedLastTurn?: readonly number[] },
): EpisodeDrift {
  const fresh = tokenizeConversation(tokenizer, messages, tools, {
    trainOn: 'all',
    now: options.now,
    ...(options.enableThinking === undefined ? {} : { enableThinking: options.enableThinking }),
  });
  if (!fresh.ok)
    return {
      checked: false,
      drifted: false,
      firstDifference: null,
      tokens: 0,
      reason: `[${fresh.code}] ${fresh.reason}`,
    };
  const spans = fresh.sample.assistantSpans;
  let rendered = fresh.sample.inputIds.slice(0, spans[spans.length - 1].tokenEnd);
  if (
    rendered.length === sampled.length + 1 &&
    (options.unclosedLastTurn ?? []).includes(rendered[rendered.length - 1])
  )
    rendered = rendered.slice(0, -1);
  let common = 0;
  while (common < rendered.length && common < sampled.length && rendered[common] === sampled[common]) common++;
  const equal = common === rendered.length && common === sampled.length;
  return {
    checked: true,
    drifted: !equal,
    firstDifference: equal ? null : common,
    tokens: equal ? 0 : Math.max(rendered.length, sampled.length) - common,
  };
}
