import { z } from 'zod';
import { tokenizerSourceSchema } from '../../text/tokenizer-source-config';
import { probeThrough } from '../scoring/remote-token-scorer';
import {
  remoteScorerConfigSchema,
  ScoringEndpoint,
  scoringShapeError,
  type RemoteScorerConfig,
  type ScoringEndpointDependencies,
} from '../scoring/scoring-endpoint';
import { sglangScoringApi } from '../scoring/sglang-generate-logprobs';
import type { TokenProbe } from '../scoring/token-scorer';
import { vllmScoringApi } from '../scoring/vllm-prompt-logprobs';
import { reportedDistribution, type EngineLogprobsMode } from './logprob-distribution';
import type { SampledTokens, SampleRequest, TokenSampler } from './token-sampler';

/**
 * A policy or student behind a server sampled token-exact (an adapter's `tokenSampler` config
 * without its `adapter` literal): the scoring endpoint's settings (base URL, model, key source,
 * timeouts, retries, concurrency, `dummyWeights`) plus what the server's sampled-token logprobs
 * are. Adapters extend it with `adapter` and refine it with `logprobsModeCheck(api)`.
 */
export const servedSamplerFieldsSchema = remoteScorerConfigSchema
  .extend({
    /**
     * What the server reports as a sampled token's logprob. vLLM: `raw_logprobs` (its default) or
     * `processed_logprobs` (served with `--logprobs-mode processed_logprobs`); SGLang:
     * `tempered_logprobs` (its default for sampled requests) or `raw_logprobs` (served to return
     * original logprobs). Default: the server's default. The server does not tell; state it here.
     */
    logprobsMode: z.enum(['raw_logprobs', 'processed_logprobs', 'tempered_logprobs']).optional(),
    /**
     * How tool calls are read from generated text, as vLLM's `--tool-call-parser` (`hermes`,
     * `qwen3_coder`, `llama3_json`, ...) or `auto`: detected from the chat template. Default auto.
     */
    toolCallParser: z.string().min(1).default('auto'),
    /**
     * The served model's tokenizer and chat template (a preset or a model directory): prompts are
     * rendered and tokenized with it here, and it is checked against the server by a probe.
     * Distill's student needs it; rl renders with `rl.tokenizer`, which it must equal when given.
     */
    tokenizer: tokenizerSourceSchema.optional(),
  })
  .strict();
export type ServedSamplerConfig = z.infer<typeof servedSamplerFieldsSchema>;
export type ServedSamplerConfigInput = z.input<typeof servedSamplerFieldsSchema>;

/** What one served sample reads back. */
export interface ServedSample {
  tokenIds: number[];
  logprobs: number[];
  finishReason: 'stop' | 'length';
  cachedPromptTokens?: number;
}

/**
 * How one server kind is sampled by token ids: its path, request body and answer, what its
 * logprobs are, and how its tokenizer is probed. An adapter's `tokenSampler` builds a
 * `ServedTokenSampler` over one (vllm-adapter.ts, sglang-adapter.ts; the model-adapter how-to
 * walks a new one).
 */
export interface TokenSamplingApi {
  /** Recorded with the samples and named in messages (`vllm`, `sglang`). */
  engine: string;
  /** Path under the server root, e.g. `/v1/completions`. */
  path: string;
  /** What the server reports unless told otherwise. */
  defaultLogprobsMode: EngineLogprobsMode;
  /** Every mode it can be told to report (a config naming another is refused). */
  logprobsModes: readonly EngineLogprobsMode[];
  /** How to make it report the processed distribution, when it can (a hint in refusals). */
  processedLogprobsHint?: string;
  requestBody(model: string, request: SampleRequest): Record<string, unknown>;
  sampledTokens(body: unknown, url: string): ServedSample;
  /** The texts the server's tokenizer gives `tokenIds` (the check before sampling); absent: it cannot be asked. */
  probe?(
    endpoint: ScoringEndpoint,
    config: RemoteScorerConfig,
    tokenIds: readonly number[],
    signal?: AbortSignal,
  ): Promise<TokenProbe>;
}

/** Refuses a `logprobsMode` the server cannot report (a refinement of an adapter's sampler schema). */
export function logprobsModeCheck(api: TokenSamplingApi) {
  return (config: { logprobsMode?: EngineLogprobsMode }, context: z.RefinementCtx): void => {
    if (config.logprobsMode === undefined || api.logprobsModes.includes(config.logprobsMode)) return;
    context.addIssue({
      code: 'custom',
      path: ['logprobsMode'],
      message: `${api.engine} reports ${api.logprobsModes.join(' or ')}, not ${config.logprobsMode}`,
    });
  };
}

/** vLLM `/v1/completions` body: token-id prompt, one logprob per sampled token, tokens named by id. */
export function vllmSamplingRequest(model: string, request: SampleRequest): Record<string, unknown> {
  const { sampling } = request;
  return {
    model,
    prompt: [...request.promptIds],
    max_tokens: request.maxTokens,
    // Sent explicitly: omitted, vLLM applies the model's generation_config.json defaults.
    temperature: sampling.temperature,
    top_p: sampling.topP,
    top_k: sampling.topK > 0 ? sampling.topK : -1,
    seed: request.seed,
    logprobs: 1,
    return_tokens_as_token_ids: true,
    stop_token_ids: [...request.stopTokenIds],
    skip_special_tokens: false,
  };
}

const tokenIdPattern = /^token_id:(\d+)$/;

/** Sampled ids and logprobs of a vLLM completions answer (`logprobs.tokens` read `token_id:<id>`). */
export function vllmSampledTokens(
  body: unknown,
  url: string,
): { tokenIds: number[]; logprobs: number[]; finishReason: 'stop' | 'length'; cachedPromptTokens?: number } {
  const choices = (body as { choices?: unknown } | null)?.choices;
  const choice = Array.isArray(choices) ? (choices[0] as Record<string, unknown> | undefined) : undefined;
  const logprobs = choice?.logprobs as { tokens?: unknown; token_logprobs?: unknown } | null | undefined;
  if (!choice || !logprobs || !Array.isArray(logprobs.tokens) || !Array.isArray(logprobs.token_logprobs)) {
    throw scoringShapeError(
      url,
      'vllm',
      'choices[0].logprobs.tokens/token_logprobs are missing; the server must answer /v1/completions with logprobs',
    );
  }
  const tokenIds = logprobs.tokens.map((token, index) => {
    const match = typeof token === 'string' ? tokenIdPattern.exec(token) : null;
    if (!match)
      throw scoringShapeError(
        url,
        'vllm',
        `choices[0].logprobs.tokens[${index}] is ${JSON.stringify(token)}, not "token_id:<id>"; the server ignored return_tokens_as_token_ids`,
      );
    return Number(match[1]);
  });
  const values = logprobs.token_logprobs.map((value, index) => {
    if (typeof value !== 'number')
      throw scoringShapeError(url, 'vllm', `choices[0].logprobs.token_logprobs[${index}] is not a number`);
    return value;
  });
  if (values.length !== tokenIds.length)
    throw scoringShapeError(url, 'vllm', `${tokenIds.length} tokens but ${values.length} token_logprobs`);
  const reported = choice.token_ids;
  if (
    Array.isArray(reported) &&
    (reported.length !== tokenIds.length || reported.some((id, index) => id !== tokenIds[index]))
  ) {
    throw scoringShapeError(url, 'vllm', 'choices[0].token_ids differ from the ids in choices[0].logprobs.tokens');
  }
  const usage = (body as { usage?: { prompt_tokens_details?: { cached_tokens?: unknown } } }).usage;
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  return {
    tokenIds,
    logprobs: values,
    finishReason: choice.finish_reason === 'stop' ? 'stop' : 'length',
    ...(typeof cached === 'number' ? { cachedPromptTokens: cached } : {}),
  };
}

/** SGLang `/generate` body: `input_ids`, sampling params, the sampled tokens' logprobs only. */
export function sglangSamplingRequest(request: SampleRequest): Record<string, unknown> {
  const { sampling } = request;
  return {
    input_ids: [...request.promptIds],
    sampling_params: {
      max_new_tokens: request.maxTokens,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: sampling.topK > 0 ? sampling.topK : -1,
      stop_token_ids: [...request.stopTokenIds],
      sampling_seed: request.seed,
      skip_special_tokens: false,
      no_stop_trim: true,
    },
    return_logprob: true,
    logprob_start_len: -1,
    top_logprobs_num: 0,
  };
}

/**
 * Sampled ids and logprobs of an SGLang answer, from `meta_info.output_token_logprobs`
 * (`[logprob, token_id, text]`, text null unless `return_text_in_logprobs`). `finish_reason` is
 * `{type: "stop", matched}` (a stop token id or string), `{type: "length", length}` or
 * `{type: "abort", message}` (refused here: an aborted generation is not a sample), null while
 * unfinished. `output_ids` and `completion_tokens`, where present, must agree with the triples.
 */
export function sglangSampledTokens(
  body: unknown,
  url: string,
): { tokenIds: number[]; logprobs: number[]; finishReason: 'stop' | 'length'; cachedPromptTokens?: number } {
  const answer = (Array.isArray(body) ? body[0] : body) as
    { output_ids?: unknown; meta_info?: Record<string, unknown> } | undefined;
  const meta = answer?.meta_info;
  const triples = meta?.output_token_logprobs;
  if (!meta || !Array.isArray(triples))
    throw scoringShapeError(
      url,
      'sglang',
      'meta_info.output_token_logprobs is missing; the server must support return_logprob',
    );
  const tokenIds: number[] = [];
  const logprobs: number[] = [];
  triples.forEach((triple, index) => {
    if (!Array.isArray(triple) || typeof triple[0] !== 'number' || !Number.isInteger(triple[1])) {
      throw scoringShapeError(url, 'sglang', `meta_info.output_token_logprobs[${index}] is not [logprob, id, text]`);
    }
    logprobs.push(triple[0]);
    tokenIds.push(triple[1] as number);
  });
  const finish = meta.finish_reason as { type?: unknown; message?: unknown } | null | undefined;
  if (!finish || (finish.type !== 'stop' && finish.type !== 'length')) {
    const why =
      finish?.type === 'abort'
        ? `the server aborted the generation (${String(finish.message ?? 'no message')})`
        : `meta_info.finish_reason is ${JSON.stringify(finish ?? null)}, not {type: "stop" | "length"}`;
    throw scoringShapeError(url, 'sglang', why);
  }
  const outputIds = answer?.output_ids;
  if (
    Array.isArray(outputIds) &&
    (outputIds.length !== tokenIds.length || outputIds.some((id, index) => id !== tokenIds[index]))
  ) {
    throw scoringShapeError(url, 'sglang', 'output_ids differ from the ids in meta_info.output_token_logprobs');
  }
  if (typeof meta.completion_tokens === 'number' && meta.completion_tokens !== tokenIds.length) {
    throw scoringShapeError(
      url,
      'sglang',
      `meta_info.completion_tokens is ${meta.completion_tokens} but output_token_logprobs has ${tokenIds.length} entries`,
    );
  }
  const cached = meta.cached_tokens;
  return {
    tokenIds,
    logprobs,
    finishReason: finish.type,
    ...(typeof cached === 'number' ? { cachedPromptTokens: cached } : {}),
  };
}

/** vLLM `/v1/completions` with token-id prompts; its prompt logprobs (`decoded_token`) probe the tokenizer. */
export const vllmSamplingApi: TokenSamplingApi = {
  engine: 'vllm',
  path: '/v1/completions',
  defaultLogprobsMode: 'raw_logprobs',
  logprobsModes: ['raw_logprobs', 'processed_logprobs'],
  processedLogprobsHint: 'serve with `--logprobs-mode processed_logprobs` and set logprobsMode: processed_logprobs',
  requestBody: vllmSamplingRequest,
  sampledTokens: vllmSampledTokens,
  probe: (endpoint, config, tokenIds, signal) => probeThrough(vllmScoringApi, endpoint, config, tokenIds, signal),
};

/** SGLang `/generate` with `input_ids`; `return_text_in_logprobs` probes the tokenizer. */
export const sglangSamplingApi: TokenSamplingApi = {
  engine: 'sglang',
  path: '/generate',
  defaultLogprobsMode: 'tempered_logprobs',
  logprobsModes: ['tempered_logprobs', 'raw_logprobs'],
  requestBody: (_model, request) => sglangSamplingRequest(request),
  sampledTokens: sglangSampledTokens,
  probe: (endpoint, config, tokenIds, signal) => probeThrough(sglangScoringApi, endpoint, config, tokenIds, signal),
};

/**
 * Samples through a server's token-id API (`TokenSamplingApi`): one JSON POST per call (the
 * endpoint's shared concurrency limit, timeouts and retries of transient faults).
 */
export class ServedTokenSampler implements TokenSampler {
  readonly engine: string;
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly logprobsMode: EngineLogprobsMode;
  readonly defaultLogprobsMode: EngineLogprobsMode;
  readonly processedLogprobsHint?: string;
  readonly tokenizer?: ServedSamplerConfig['tokenizer'];
  readonly toolCallParser: string;
  readonly probe?: (tokenIds: readonly number[], signal?: AbortSignal) => Promise<TokenProbe>;
  private readonly endpoint: ScoringEndpoint;

  constructor(
    private readonly api: TokenSamplingApi,
    readonly config: ServedSamplerConfig,
    dependencies: ScoringEndpointDependencies = {},
  ) {
    this.endpoint = new ScoringEndpoint(config, dependencies);
    this.engine = api.engine;
    this.modelId = config.model;
    this.location = `${this.endpoint.root}${api.path}`;
    this.dummyWeights = config.dummyWeights;
    this.defaultLogprobsMode = api.defaultLogprobsMode;
    this.logprobsMode = config.logprobsMode ?? api.defaultLogprobsMode;
    if (api.processedLogprobsHint !== undefined) this.processedLogprobsHint = api.processedLogprobsHint;
    if (config.tokenizer !== undefined) this.tokenizer = config.tokenizer;
    this.toolCallParser = config.toolCallParser;
    const probe = api.probe;
    if (probe !== undefined) this.probe = (tokenIds, signal) => probe(this.endpoint, config, tokenIds, signal);
  }

  async sample(request: SampleRequest): Promise<SampledTokens> {
    const startedAt = Date.now();
    const started = performance.now();
    const answer = await this.endpoint.post(this.api.path, this.api.requestBody(this.modelId, request), request.signal);
    return {
      ...this.api.sampledTokens(answer, this.location),
      distribution: reportedDistribution(this.engine, this.logprobsMode, request.sampling),
      startedAt,
      e2eMs: performance.now() - started,
    };
  }

  async close(): Promise<void> {}
}
