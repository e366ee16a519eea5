import type { Pool } from 'undici';
import { HatError, TransientError } from '../../errors';
import type { Logger } from '../../log/logger';
import type { ModelClientDependencies } from '../model-registry';
import { loadApiKey, type ApiKey } from '../api-key';
import { endpointLimiterFor, type EndpointLimiter } from '../endpoint-limiter';
import type { ChatRequest, ChatResponse, ModelClient, PreparedChatRequest, SamplingSettings } from '../model-client';
import { abortedError, systemClock, type ModelClock } from '../model-clock';
import { modelErrorCodes, unavailableError, type EndpointContext } from '../model-errors';
import { RetryPolicy } from '../retry-policy';
import { normalizeHookMessages } from '../../text/hook-messages';
import { stringifyJsonKeepingFloats } from '../../text/python-values';
import { chatRequestTarget, runChatAttempt, type ChatRequestTarget } from './chat-completion-attempt';
import { serverRootOf, type OpenAiModelConfig } from './openai-model-config';

/**
 * What the openai client uses of the registry's dependencies, and the adapter name it reports as
 * `provider` (another HTTP adapter built on this client gives its own). Default `openai`.
 */
export type OpenAiClientDependencies = Pick<
  ModelClientDependencies,
  'logger' | 'clock' | 'random' | 'environment' | 'configPath'
> & { provider?: string };

/** Rough prompt size for the token-rate bucket before the server reports usage. */
const bytesPerToken = 4;

/**
 * `ModelClient` over any OpenAI-compatible chat server. Always streams with
 * `stream_options.include_usage` and times calls exactly as `vllm bench serve` does. Retries are
 * decided by RetryPolicy; concurrency and rate limits are the endpoint's, shared process-wide.
 * The API key stays in a private field: `toJSON` and every error message leave it out.
 */
export class OpenAiChatClient implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider: string;
  readonly modelId: string;
  readonly sampling: SamplingSettings;
  readonly #apiKey: ApiKey;
  readonly #config: OpenAiModelConfig;
  readonly #url: URL;
  readonly #target: ChatRequestTarget;
  readonly #context: EndpointContext;
  readonly #limiter: EndpointLimiter;
  readonly #retryPolicy: RetryPolicy;
  readonly #clock: ModelClock;
  readonly #logger?: Logger;
  readonly #pool: Pool;
  /** Request headers as flat name/value pairs, built once (content-length is the pool's). */
  readonly #headers: string[];
  #closed = false;

  constructor(config: OpenAiModelConfig, dependencies: OpenAiClientDependencies = {}) {
    this.#config = config;
    this.provider = dependencies.provider ?? 'openai';
    this.modelId = config.model;
    this.sampling = config.sampling;
    this.#apiKey = loadApiKey(config, dependencies.environment, dependencies.configPath);
    const root = serverRootOf(config.baseUrl);
    this.#url = new URL(`${root}/v1/chat/completions`);
    this.#target = chatRequestTarget(this.#url);
    this.#context = { url: this.#url.href, model: config.model, redact: (text) => this.#apiKey.redact(text) };
    this.#limiter = endpointLimiterFor(`${root} ${config.model}`, {
      concurrency: config.concurrency,
      requestsPerMinute: config.requestsPerMinute,
      tokensPerMinute: config.tokensPerMinute,
    });
    this.#retryPolicy = new RetryPolicy(
      {
        maxRetries: config.maxRetries,
        initialDelayMs: config.retryInitialDelayMs,
        maxDelayMs: config.retryMaxDelayMs,
        maxRetryAfterMs: config.maxRetryAfterMs,
      },
      dependencies.random,
    );
    this.#clock = dependencies.clock ?? systemClock;
    this.#logger = dependencies.logger;
    this.#pool = sharedPools.acquire(this.#url);
    const authorization = this.#apiKey.authorizationHeader();
    this.#headers = [
      'content-type',
      'application/json',
      'accept',
      'text/event-stream',
      ...(authorization ? ['authorization', authorization] : []),
    ];
  }

  /** The endpoint's shared limiter (in-flight and waiting counts for metrics). */
  get limiter(): EndpointLimiter {
    return this.#limiter;
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    if (this.#closed)
      throw new HatError(
        modelErrorCodes.clientClosed,
        `the model client for ${this.#context.url} was used after close()`,
      );
    const maxTokens = request.maxTokens ?? this.sampling.maxTokens;
    const body = request.prepared?.owner === this ? request.prepared.body : this.bodyOf(request);
    const estimatedTokens = Math.ceil(body.length / bytesPerToken) + (maxTokens ?? 0);
    const callStartedAt = performance.now();
    for (let attempt = 1; ; attempt++) {
      const attemptQueuedAt = performance.now();
      // Synchronous when a slot is free, so the request goes out in this turn of the event loop.
      const permit =
        this.#limiter.tryAcquire(estimatedTokens, request.signal, attempt > 1) ??
        (await this.#limiter.acquire(estimatedTokens, request.signal, attempt > 1));
      try {
        const result = await runChatAttempt({
          target: this.#target,
          dispatcher: this.#pool,
          headers: this.#headers,
          body,
          timeoutMs: this.#config.timeoutMs,
          signal: request.signal,
          context: this.#context,
          clock: this.#clock,
          onChunk: request.onChunk,
        });
        permit.release(result.usage.estimated ? undefined : result.usage.promptTokens + result.usage.completionTokens);
        return {
          message: result.message,
          finishReason: result.finishReason,
          usage: result.usage,
          timings: {
            startedAt: result.startedAt,
            queueMs: permit.queueMs,
            ttftMs: result.ttftMs,
            e2eMs: result.e2eMs,
            itlMs: result.itlMs,
            retryMs: attemptQueuedAt - callStartedAt,
            chunkCount: result.chunkCount,
            ...(result.firstContentMs !== undefined ? { firstContentMs: result.firstContentMs } : {}),
            ...(result.writtenMs !== undefined ? { writtenMs: result.writtenMs } : {}),
          },
          ...(result.logprobs ? { logprobs: result.logprobs } : {}),
          model: result.model || this.modelId,
          attempts: attempt,
        };
      } catch (error) {
        permit.release();
        await this.waitBeforeRetry(error, attempt, request.signal);
      }
    }
  }

  /** The request's body built now, for a later `chat({ ...request, prepared })`. */
  prepare(request: ChatRequest): PreparedChatRequest {
    return { owner: this, body: this.bodyOf(request) };
  }

  /** The request's JSON body; a tool schema's `1.0` reaches the server as `1.0`, as a Python client sends it. */
  private bodyOf(request: ChatRequest): Buffer {
    return Buffer.from(stringifyJsonKeepingFloats(this.requestBody(request)));
  }

  /** Throws when `error` ends the call; otherwise waits out the retry delay. */
  private async waitBeforeRetry(error: unknown, attempt: number, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) throw abortedError(signal);
    const decision = this.#retryPolicy.decide(error, attempt);
    if (decision.action === 'fail') throw error;
    if (decision.action === 'give-up') throw unavailableError(this.#context, attempt, error);
    // A server that asked for a pause asked every caller: hold back the whole endpoint.
    if (error instanceof TransientError && error.retryAfterMs !== undefined) this.#limiter.pause(error.retryAfterMs);
    this.#logger?.warn(
      {
        url: this.#context.url,
        model: this.modelId,
        attempt,
        delayMs: decision.delayMs,
        code: (error as { code?: unknown }).code,
      },
      'model call failed; retrying',
    );
    await this.#clock.sleep(decision.delayMs, signal);
  }

  /** The conversation as this server's template accepts it (see the config's `hookMessages`). */
  #messagesFor(request: ChatRequest): ChatRequest['messages'] {
    if (this.#config.hookMessages !== 'folded') return request.messages;
    const normalized = normalizeHookMessages(request.messages, 'folded');
    if (!normalized.ok)
      throw new HatError(
        normalized.code,
        `${this.#context.url}: cannot send this conversation with hookMessages: folded: ${normalized.reason}`,
      );
    return normalized.messages;
  }

  /** Fields left undefined are left out by JSON.stringify, which is all this body is for. */
  private requestBody(request: ChatRequest): Record<string, unknown> {
    const sampling = this.sampling;
    const logprobs = request.logprobs ?? false;
    return {
      model: this.modelId,
      messages: this.#messagesFor(request),
      tools: request.tools && request.tools.length > 0 ? request.tools : undefined,
      stream: true,
      stream_options: { include_usage: true },
      temperature: request.temperature ?? sampling.temperature,
      top_p: request.topP ?? sampling.topP,
      top_k: request.topK ?? sampling.topK,
      max_tokens: request.maxTokens ?? sampling.maxTokens,
      seed: request.seed ?? sampling.seed,
      stop: request.stop ?? sampling.stop,
      logprobs: logprobs || undefined,
      top_logprobs: logprobs ? request.topLogprobs : undefined,
      ...this.#config.extraBody,
      ...request.extraBody,
    };
  }

  /** What is safe to serialize: the endpoint and settings, never the key. */
  toJSON(): Record<string, unknown> {
    const { apiKeyEnv, apiKeyFile, ...settings } = this.#config;
    return {
      provider: this.provider,
      modelId: this.modelId,
      ...settings,
      apiKey: this.#apiKey.toJSON(),
      ...(apiKeyEnv ? { apiKeyEnv } : {}),
      ...(apiKeyFile ? { apiKeyFile } : {}),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await sharedPools.release(this.#url);
  }
}

/**
 * Keep-alive connection pools (undici) per server origin, shared by every client of that origin
 * and destroyed when the last one closes. Connections are unlimited here: the endpoint limiter
 * bounds concurrency.
 */
const sharedPools = {
  pools: new Map<string, { pool: Pool; users: number }>(),
  /** undici (about 110 modules), loaded with the first pool: a process that calls no such server never loads it. */
  undici: undefined as typeof import('undici') | undefined,
  acquire(url: URL): Pool {
    const entry = this.pools.get(url.origin);
    if (entry) {
      entry.users++;
      return entry.pool;
    }
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily, see `undici` above
    this.undici ??= require('undici') as typeof import('undici');
    const pool = new this.undici.Pool(url.origin, { connections: null, pipelining: 1 });
    this.pools.set(url.origin, { pool, users: 1 });
    return pool;
  },
  async release(url: URL): Promise<void> {
    const entry = this.pools.get(url.origin);
    if (!entry) return;
    entry.users--;
    if (entry.users <= 0) {
      this.pools.delete(url.origin);
      await entry.pool.destroy();
    }
  },
};
