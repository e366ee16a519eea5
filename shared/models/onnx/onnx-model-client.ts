import { basename, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { AssistantMessage, ChatMessage, ToolSpec } from '../../trajectory/messages';
import type {
  ChatRequest,
  ChatResponse,
  FinishReason,
  ModelClient,
  SamplingSettings,
  TokenLogprob,
} from '../model-client';
import { createChatTemplateRenderer, type ChatRenderer } from './chat-template-renderer';
import { detectToolCallParser, type ToolCallParser } from '../../text/tool-parsers';
import { loadDecoderTokenizer, type DecoderTokenizer } from './decoder-tokenizer';
import {
  OnnxDecoder,
  type GenerateOptions,
  type GenerationResult,
  type OnnxDecoderOptions,
  type OnnxModelInfo,
  type ScoreOptions,
  type ScoreResult,
} from './onnx-decoder';

/** How to build an ONNX model client. */
export interface OnnxModelClientOptions extends OnnxDecoderOptions {
  /** Model directory: model.onnx, config.json, tokenizer.json, tokenizer_config.json. */
  modelDir: string;
  /** Id reported as `model`. Default: the directory's name. */
  modelId?: string;
  /** Sampling defaults; a request's own values win. maxTokens defaults to 256, temperature to 1. */
  sampling?: SamplingSettings;
}

/** A loaded model: the decoder, its tokenizer and its chat template. */
export interface LoadedOnnxModel {
  decoder: OnnxDecoder;
  tokenizer: DecoderTokenizer;
  renderer: ChatRenderer;
  /** The tool-call format the chat template teaches (null: none known, replies stay text). */
  toolParser: ToolCallParser | null;
  /** The template writes `<think>` blocks: a reply's block is returned as reasoning, not content. */
  thinks: boolean;
  info: OnnxModelInfo & { tokenizerFingerprint: string };
}

const defaultMaxTokens = 256;

/**
 * The `onnx` model backend: chat() renders messages with the model's chat template, generates
 * in-process and answers like a non-tool-parsing server (the text is the content). Calls on one
 * client run one at a time (CPU inference gains nothing from interleaving); the model loads on
 * first use. `generate` and `score` expose token-level access for distillation.
 */
export class OnnxModelClient implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider = 'onnx';
  readonly modelId: string;
  readonly sampling: SamplingSettings;
  private loading?: Promise<LoadedOnnxModel>;
  private gate: Promise<unknown> = Promise.resolve();
  private calls = 0;

  constructor(private readonly options: OnnxModelClientOptions) {
    this.modelId = options.modelId ?? basename(resolve(options.modelDir));
    this.sampling = options.sampling ?? {};
  }

  /** Loads (once) and returns the decoder, tokenizer and chat template. */
  load(): Promise<LoadedOnnxModel> {
    this.loading ??= (async () => {
      const directory = resolve(this.options.modelDir);
      const decoder = await OnnxDecoder.load(directory, this.options);
      const tokenizer = loadDecoderTokenizer(directory);
      const renderer = createChatTemplateRenderer(directory, tokenizer.tokenizerConfig);
      // The tokenizer's eos (e.g. <|im_end|>) ends a chat turn even when config.json names another.
      const eos =
        tokenizer.specialTokens.eos === undefined ? undefined : tokenizer.tokenId(tokenizer.specialTokens.eos);
      if (eos !== undefined && !decoder.info.eosTokenIds.includes(eos)) decoder.info.eosTokenIds.push(eos);
      return {
        decoder,
        tokenizer,
        renderer,
        toolParser: detectToolCallParser(renderer.templateText) ?? null,
        thinks: renderer.templateText.includes('</think>'),
        info: { ...decoder.info, tokenizerFingerprint: tokenizer.fingerprint },
      };
    })();
    return this.loading;
  }

  /** What the model is (shape, eos ids, `dummyWeights`, tokenizer fingerprint). */
  async info(): Promise<LoadedOnnxModel['info']> {
    return (await this.load()).info;
  }

  /** The prompt's token ids as chat() builds them (chat template with generation prompt, then tokenizer). */
  async promptIds(messages: ChatMessage[], tools?: ToolSpec[]): Promise<number[]> {
    const model = await this.load();
    return model.tokenizer.encode(model.renderer.render(messages, { tools, addGenerationPrompt: true }));
  }

  /** Token-level generation (see OnnxDecoder.generate); runs in this client's queue. */
  async generate(promptIds: readonly number[], options: GenerateOptions = {}): Promise<GenerationResult> {
    const model = await this.load();
    return this.exclusive(() => model.decoder.generate(promptIds, options));
  }

  /** Log-probabilities of completion tokens after a prompt (see OnnxDecoder.score). */
  async score(
    promptIds: readonly number[],
    completionIds: readonly number[],
    options: ScoreOptions = {},
  ): Promise<ScoreResult> {
    const model = await this.load();
    return this.exclusive(() => model.decoder.score(promptIds, completionIds, options));
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const model = await this.load();
    const callIndex = this.calls++;
    const startedAt = Date.now();
    const gateStart = performance.now();
    return this.exclusive(async () => {
      const queueMs = performance.now() - gateStart;
      const sent = performance.now();
      const promptIds = model.tokenizer.encode(
        model.renderer.render(request.messages, { tools: request.tools, addGenerationPrompt: true }),
      );
      const stops = (request.stop ?? this.sampling.stop ?? []).filter((stop) => stop.length > 0);
      const stopTokenIds = new Set(model.decoder.info.eosTokenIds);
      const generatedIds: number[] = [];
      const tokenTimes: number[] = [];
      let firstContentMs: number | undefined;
      let text = '';
      let emitted = '';
      let stopAt = -1;
      const contentOf = (tokenIds: number[]): string => {
        const last = tokenIds[tokenIds.length - 1];
        return model.tokenizer.decode(last !== undefined && stopTokenIds.has(last) ? tokenIds.slice(0, -1) : tokenIds);
      };
      const maxNewTokens = request.maxTokens ?? this.sampling.maxTokens ?? defaultMaxTokens;
      const result = await model.decoder.generate(promptIds, {
        maxNewTokens,
        temperature: request.temperature ?? this.sampling.temperature ?? 1,
        topP: request.topP ?? this.sampling.topP ?? 1,
        topK: Math.max(0, request.topK ?? this.sampling.topK ?? 0),
        // Unseeded calls still replay: the seed follows the client's call order.
        seed: request.seed ?? this.sampling.seed ?? `${this.modelId}/call-${callIndex}`,
        logprobs: request.logprobs ?? false,
        topLogprobs: request.topLogprobs ?? 0,
        stopTokenIds: [...stopTokenIds],
        signal: request.signal,
        onToken: ({ tokenId }) => {
          const atMs = performance.now() - sent;
          tokenTimes.push(atMs);
          generatedIds.push(tokenId);
          text = contentOf(generatedIds);
          stopAt = firstStop(text, stops);
          const last = stopAt >= 0 || stopTokenIds.has(tokenId) || generatedIds.length >= maxNewTokens;
          // A trailing U+FFFD may be half a multi-byte character: wait for the rest unless this is the end.
          const visible = stopAt >= 0 ? text.slice(0, stopAt) : text.endsWith('\uFFFD') && !last ? emitted : text;
          const delta = visible.startsWith(emitted) ? visible.slice(emitted.length) : '';
          emitted = visible;
          if (delta !== '') firstContentMs ??= atMs;
          request.onChunk?.({ atMs, contentDelta: delta === '' ? undefined : delta });
        },
        shouldStop: () => stopAt >= 0,
      });
      const generated = stopAt >= 0 ? text.slice(0, stopAt) : text;
      const reply = assistantReplyOf(generated, result.finishReason, model, request.tools);
      const response: ChatResponse = {
        message: reply.message,
        finishReason: reply.finishReason,
        usage: { promptTokens: promptIds.length, completionTokens: result.tokenIds.length },
        timings: {
          startedAt,
          queueMs,
          ttftMs: tokenTimes[0] ?? performance.now() - sent,
          e2eMs: tokenTimes[tokenTimes.length - 1] ?? performance.now() - sent,
          itlMs: tokenTimes.slice(1).map((time, index) => time - tokenTimes[index]),
          chunkCount: tokenTimes.length,
          ...(firstContentMs !== undefined ? { firstContentMs } : {}),
        },
        model: this.modelId,
        attempts: 1,
      };
      if (result.tokens)
        response.logprobs = result.tokens.map((token): TokenLogprob => ({
          token: model.tokenizer.tokenText(token.tokenId),
          tokenId: token.tokenId,
          logprob: token.logprob,
          top: token.top?.map((entry) => ({
            token: model.tokenizer.tokenText(entry.tokenId),
            tokenId: entry.tokenId,
            logprob: entry.logprob,
          })),
        }));
      return response;
    });
  }

  async close(): Promise<void> {
    const loading = this.loading;
    this.loading = undefined;
    if (loading) await (await loading).decoder.close();
  }

  /** Runs calls one at a time; a failed call does not block the next. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.gate.then(work, work);
    this.gate = run.catch(() => undefined);
    return run;
  }
}

function firstStop(text: string, stops: readonly string[]): number {
  let first = -1;
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index >= 0 && (first < 0 || index < first)) first = index;
  }
  return first;
}

/**
 * A reply's reasoning and content as vLLM's Qwen3/DeepSeek reasoning parsers split them: the text
 * up to `</think>` (without an opening `<think>`) is reasoning; without `</think>` all is content.
 */
export function splitReasoning(text: string): { reasoning?: string; content: string } {
  const end = text.indexOf('</think>');
  if (end < 0) return { content: text };
  const reasoning = text
    .slice(0, end)
    .replace(/^\s*<think>/, '')
    .trim();
  return { ...(reasoning ? { reasoning } : {}), content: text.slice(end + '</think>'.length).replace(/^\s+/, '') };
}

/**
 * The reply as a vLLM server with the template's reasoning and tool-call parsers returns it: a
 * `<think>` block as `reasoning_content`, calls in the template's own format (with tools in the
 * request) as `tool_calls` and finish reason `tool_calls`; everything else is content (text after
 * the calls too, which vLLM leaves out, and compact arguments JSON: the parsers' options for
 * training data).
 */
export function assistantReplyOf(
  generated: string,
  finishReason: 'stop' | 'length',
  model: Pick<LoadedOnnxModel, 'toolParser' | 'thinks'>,
  tools: ToolSpec[] | undefined,
): { message: AssistantMessage; finishReason: FinishReason } {
  const { reasoning, content } = model.thinks ? splitReasoning(generated) : { content: generated };
  // The stricter options for training data (docs/byte-exact.md): this reply becomes a trajectory
  // turn, so text after the calls stays in its content (vLLM's content stops at the first call),
  // arguments are JSON objects, and they keep the form earlier trajectories have (`{"a":1}`).
  const parsed =
    tools && tools.length > 0 && model.toolParser
      ? model.toolParser.parse(content, {
          tools,
          content: 'around-calls',
          argumentsSpacing: 'compact',
          arguments: 'checked',
        })
      : undefined;
  const calls = parsed && parsed.toolCalls.length > 0 ? parsed : undefined;
  return {
    message: {
      role: 'assistant',
      content: calls ? calls.content : content,
      ...(calls ? { tool_calls: calls.toolCalls } : {}),
      ...(reasoning ? { reasoning_content: reasoning } : {}),
    },
    finishReason: calls && finishReason === 'stop' ? 'tool_calls' : finishReason,
  };
}
