import { z } from 'zod';
import {
  remoteScorerConfigSchema,
  ScoringEndpoint,
  scoringShapeError,
  type ScoringEndpointDependencies,
} from '../scoring/scoring-endpoint';
import { reportedDistribution, type EngineLogprobsMode } from './logprob-distribution';
import type { SampledTokens, SampleRequest, TokenSampler } from './token-sampler';

/**
 * A policy or student behind vLLM or SGLang, sampled token-exact: the scoring endpoint's settings
 * (base URL, model, key source, timeouts, retries, concurrency, `dummyWeights`) plus what the
 * server's sampled-token logprobs are. Unrefined, so stage configs can extend it; parse configs
 * with `servedSamplerConfigSchema` (or refine with `checkLogprobsModeOfEngine`).
 */
export const servedSamplerFieldsSchema = remoteScorerConfigSchema
  .extend({
    /**
     * What the server reports as a sampled token's logprob. vLLM: `raw_logprobs` (its default) or
     * `processed_logprobs` (served with `--logprobs-mode processed_logprobs`); SGLang:
     * `tempered_logprobs` (its default for sampled requests) or `raw_logprobs` (served to return
     * original logprobs). Default: the engine's default. The server does not tell; state it here.
     */
    logprobsMode: z.enum(['raw_logprobs', 'processed_logprobs', 'tempered_logprobs']).optional(),
    /**
     * How tool calls are read from generated text, as vLLM's `--tool-call-parser` (`hermes`,
     * `qwen3_coder`, `llama3_json`, ...) or `auto`: detected from the chat template. Default auto.
     */
    toolCallParser: z.string().min(1).default('auto'),
  })
  .strict();

/** Refuses a logprobs mode the engine does not have. */
export function checkLogprobsModeOfEngine(
  config: { engine: 'vllm' | 'sglang'; logprobsMode?: EngineLogprobsMode },
  context: z.RefinementCtx,
): void {
  if (config.engine === 'vllm' && config.logprobsMode === 'tempered_logprobs') {
    context.addIssue({
      code: 'custom',
      path: ['logprobsMode'],
      message: 'vLLM reports raw_logprobs or processed_logprobs (its --logprobs-mode), not tempered_logprobs',
    });
  }
  if (config.engine === 'sglang' && config.logprobsMode === 'processed_logprobs') {
    context.addIssue({
      code: 'custom',
      path: ['logprobsMode'],
      message: 'SGLang reports tempered_logprobs (sampled requests) or raw_logprobs, not processed_logprobs',
    });
  }
}

export const servedSamplerConfigSchema = servedSamplerFieldsSchema.superRefine(checkLogprobsModeOfEngine);
export type ServedSamplerConfig = z.infer<typeof servedSamplerFieldsSchema>;
export type ServedSamplerConfigInput = z.input<typeof servedSamplerConfigSchema>;

/** The engine's logprobs mode when the config does not state one. */
export function logprobsModeOf(config: Pick<ServedSamplerConfig, 'engine' | 'logprobsMode'>): EngineLogprobsMode {
  return config.logprobsMode ?? (config.engine === 'vllm' ? 'raw_logprobs' : 'tempered_logprobs');
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

/**
 * Samples through vLLM's `/v1/completions` or SGLang's `/generate`: one JSON POST per call
 * (the endpoint's shared concurrency limit, timeouts and retries of transient faults).
 */
export class ServedTokenSampler implements TokenSampler {
  readonly engine: 'vllm' | 'sglang';
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly logprobsMode: EngineLogprobsMode;
  private readonly endpoint: ScoringEndpoint;
  private readonly path: string;

  constructor(
    readonly config: ServedSamplerConfig,
    dependencies: ScoringEndpointDependencies = {},
  ) {
    const { logprobsMode: _mode, toolCallParser: _parser, ...endpoint } = config;
    this.endpoint = new ScoringEndpoint(endpoint, dependencies);
    this.engine = config.engine;
    this.modelId = config.model;
    this.path = config.engine === 'vllm' ? '/v1/completions' : '/generate';
    this.location = `${this.endpoint.root}${this.path}`;
    this.dummyWeights = config.dummyWeights;
    this.logprobsMode = logprobsModeOf(config);
  }

  async sample(request: SampleRequest): Promise<SampledTokens> {
    const startedAt = Date.now();
    const started = performance.now();
    const body = this.engine === 'vllm' ? vllmSamplingRequest(this.modelId, request) : sglangSamplingRequest(request);
    const answer = await this.endpoint.post(this.path, body, request.signal);
    const sampled =
      this.engine === 'vllm' ? vllmSampledTokens(answer, this.location) : sglangSampledTokens(answer, this.location);
    return {
      ...sampled,
      distribution: reportedDistribution(this.engine, this.logprobsMode, request.sampling),
      startedAt,
      e2eMs: performance.now() - started,
    };
  }

  async close(): Promise<void> {}
}
