import type { EngineLogprobsMode, LogprobDistribution, SamplingOfTurn } from './logprob-distribution';

/** One sampling call: token ids in, sampled token ids with their logprobs out. */
export interface SampleRequest {
  promptIds: readonly number[];
  sampling: SamplingOfTurn;
  maxTokens: number;
  /** Integer seed sent to the engine (vLLM `seed`, SGLang `sampling_seed`, the in-process decoder's seed). */
  seed: number;
  /** Ids that end the turn (kept as the last sampled id). */
  stopTokenIds: readonly number[];
  signal?: AbortSignal;
}

export interface SampledTokens {
  /** The sampled ids as the engine drew them, a stop id included when it stopped on one. */
  tokenIds: number[];
  /** One per sampled id, of `distribution`. */
  logprobs: number[];
  distribution: LogprobDistribution;
  finishReason: 'stop' | 'length';
  /** Epoch ms when the request was sent, and its duration. */
  startedAt: number;
  e2eMs: number;
  /** Prompt tokens the server served from its prefix cache, when it says. */
  cachedPromptTokens?: number;
}

/**
 * A policy or student that samples from token ids: vLLM `/v1/completions`, SGLang `/generate`, or
 * an in-process ONNX decoder. What its logprobs mean is fixed per engine and setting
 * (`logprobsMode`); `distribution` on each result says it for the settings used.
 */
export interface TokenSampler {
  readonly engine: 'vllm' | 'sglang' | 'onnx';
  readonly modelId: string;
  /** Server URL or model directory. */
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly logprobsMode: EngineLogprobsMode;
  sample(request: SampleRequest): Promise<SampledTokens>;
  close(): Promise<void>;
}
