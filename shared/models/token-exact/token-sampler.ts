import type { OnnxTokenScorer } from '../scoring/onnx-token-scorer';
import type { TokenProbe } from '../scoring/token-scorer';
import type { TokenizerSource } from '../../text/tokenizer-source-config';
import type { EngineLogprobsMode, LogprobDistribution, LogprobSource, SamplingOfTurn } from './logprob-distribution';

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
 * A policy or student that samples from token ids: vLLM `/v1/completions`, SGLang `/generate`, an
 * in-process ONNX decoder, or any adapter's `tokenSampler` (model-registry.ts). What its logprobs
 * mean is fixed per engine and setting (`logprobsMode`); `distribution` on each result says it for
 * the settings used. The optional members are what a stage may ask of it besides sampling.
 */
export interface TokenSampler extends LogprobSource {
  /** Recorded with the samples (`vllm`, `sglang`, `onnx`, an adapter's own name). */
  readonly engine: string;
  readonly modelId: string;
  /** Server URL or model directory. */
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly logprobsMode: EngineLogprobsMode;
  /**
   * The tokenizer and chat template prompts for it are rendered with, when it knows them: an
   * in-process model's directory, a served model's configured `tokenizer`.
   */
  readonly tokenizer?: TokenizerSource;
  /** How tool calls are read from its generated text (vLLM's `--tool-call-parser` names, or `auto`). */
  readonly toolCallParser?: string;
  /**
   * An in-process model behind it: a stage may sample in batches and rescore at other
   * temperatures with it (distill does).
   */
  readonly decoder?: OnnxTokenScorer;
  sample(request: SampleRequest): Promise<SampledTokens>;
  /**
   * Decodes each id as the server's own tokenizer does (a served model): token-exact sampling
   * sends ids of a local tokenizer, so stages check both read them as the same text.
   */
  probe?(tokenIds: readonly number[], signal?: AbortSignal): Promise<TokenProbe>;
  close(): Promise<void>;
}
