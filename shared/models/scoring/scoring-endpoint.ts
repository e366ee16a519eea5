import { z } from 'zod';
import { BadInputError, TransientError, type HatError } from '../../errors';
import type { Logger } from '../../log/logger';
import { loadApiKey, type ApiKey } from '../api-key';
import { endpointLimiterFor, type EndpointLimiter } from '../endpoint-limiter';
import { abortedError, systemClock, type ModelClock } from '../model-clock';
import {
  badResponseError,
  errorFromStatus,
  errorFromTransport,
  timeoutError,
  unavailableError,
  type EndpointContext,
} from '../model-errors';
import { openAiModelConfigSchema, serverRootOf } from '../openai/openai-model-config';
import { RetryPolicy, parseRetryAfter } from '../retry-policy';

/**
 * A served model sampled or scored by token ids (vLLM, SGLang, another adapter's server): the
 * `openai` adapter's endpoint settings (base URL, model, key source, timeouts, retries,
 * concurrency). Which API it speaks is its adapter's (`adapter: vllm | sglang`, model-registry.ts):
 * adapters extend this schema with their `adapter` literal and their own fields.
 */
export const remoteScorerConfigSchema = openAiModelConfigSchema
  .omit({ adapter: true, sampling: true, extraBody: true, requestsPerMinute: true, tokensPerMinute: true })
  .extend({
    /** The served model has random weights (a test server): recorded so reports say so. Default false. */
    dummyWeights: z.boolean().default(false),
    /**
     * vLLM only: send `echo: true, max_tokens: 0` (vLLM's echo-without-generation, no wasted
     * decode step) instead of `max_tokens: 1`. Default false: `max_tokens: 1` works on every version.
     */
    echoWithoutGeneration: z.boolean().default(false),
  })
  .strict();
export type RemoteScorerConfig = z.infer<typeof remoteScorerConfigSchema>;
export type RemoteScorerConfigInput = z.input<typeof remoteScorerConfigSchema>;

export interface ScoringEndpointDependencies {
  logger?: Logger;
  clock?: ModelClock;
  /** Uniform [0, 1) for retry jitter. */
  random?: () => number;
  environment?: NodeJS.ProcessEnv;
  /** Where the config sits, for messages. Default `teacher`. */
  configPath?: string;
}

/** Error bodies are read for their message only. */
const longestErrorBody = 64 * 1024;

/**
 * JSON POSTs to one scoring server: the endpoint's shared concurrency limit, one timeout per
 * attempt, retries decided by RetryPolicy (transient faults only, honouring Retry-After), HTTP
 * statuses mapped to error classes by `errorFromStatus`. The API key stays private.
 */
export class ScoringEndpoint {
  readonly root: string;
  readonly #apiKey: ApiKey;
  readonly #limiter: EndpointLimiter;
  readonly #retryPolicy: RetryPolicy;
  readonly #clock: ModelClock;
  readonly #logger?: Logger;

  constructor(
    readonly config: RemoteScorerConfig,
    dependencies: ScoringEndpointDependencies = {},
  ) {
    this.root = serverRootOf(config.baseUrl);
    this.#apiKey = loadApiKey(config, dependencies.environment, dependencies.configPath ?? 'teacher');
    this.#limiter = endpointLimiterFor(`${this.root} ${config.model}`, { concurrency: config.concurrency });
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
  }

  /** POSTs `body` to `<root><path>` and returns the parsed JSON answer. */
  async post(path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    const url = `${this.root}${path}`;
    const context: EndpointContext = { url, model: this.config.model, redact: (text) => this.#apiKey.redact(text) };
    const text = JSON.stringify(body);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    const authorization = this.#apiKey.authorizationHeader();
    if (authorization) headers.authorization = authorization;
    for (let attempt = 1; ; attempt++) {
      const permit = await this.#limiter.acquire(0, signal, attempt > 1);
      try {
        return await this.attempt(url, headers, text, context, signal);
      } catch (error) {
        if (signal?.aborted) throw abortedError(signal);
        const decision = this.#retryPolicy.decide(error, attempt);
        if (decision.action === 'fail') throw error;
        if (decision.action === 'give-up') throw unavailableError(context, attempt, error);
        if (error instanceof TransientError && error.retryAfterMs !== undefined)
          this.#limiter.pause(error.retryAfterMs);
        this.#logger?.warn(
          { url, attempt, delayMs: decision.delayMs, code: (error as { code?: unknown }).code },
          'scoring call failed; retrying',
        );
        await this.#clock.sleep(decision.delayMs, signal);
      } finally {
        permit.release();
      }
    }
  }

  private async attempt(
    url: string,
    headers: Record<string, string>,
    body: string,
    context: EndpointContext,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    if (signal?.aborted) throw abortedError(signal);
    const timeout = AbortSignal.timeout(this.config.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let response: Response;
    let responseText: string;
    try {
      response = await fetch(url, { method: 'POST', headers, body, signal: combined });
      responseText = await response.text();
    } catch (error) {
      if (signal?.aborted) throw abortedError(signal);
      if (timeout.aborted) throw timeoutError(context, this.config.timeoutMs);
      throw errorFromTransport((error as { cause?: unknown }).cause ?? error, context, false);
    }
    if (response.status !== 200) {
      const retryAfterMs = parseRetryAfter(Object.fromEntries(response.headers), this.#clock.now());
      throw errorFromStatus(response.status, responseText.slice(0, longestErrorBody), retryAfterMs, context);
    }
    try {
      return JSON.parse(responseText) as unknown;
    } catch {
      throw badResponseError(context, `the body is not JSON: ${responseText.slice(0, 200)}`);
    }
  }
}

/**
 * A 200 answer without the documented scoring shape: almost always a server of another kind
 * (an SGLang URL configured as vLLM, a proxy's page), so permanent, naming the field to check.
 */
export function scoringShapeError(url: string, adapter: string, detail: string): HatError {
  return new BadInputError(
    'SCORING_BAD_RESPONSE',
    `${url} answered with a body that is not a ${adapter} scoring response (${detail}); check that adapter: ${adapter} matches the server behind baseUrl`,
  );
}
