import type { TokenizerSource } from '../../text/tokenizer-source-config';

/**
 * Teacher scoring: the log-probabilities a model gives to token ids it did not choose (a
 * student's completion), from one pass over prompt + completion. The same interface covers an
 * in-process ONNX model and inference servers (vLLM `prompt_logprobs`, SGLang
 * `input_token_logprobs`, any adapter's `tokenScorer`), so a distillation stage never cares where
 * the teacher runs.
 */

/** Where a scorer's numbers come from (`onnx`, `vllm`, `sglang`, an adapter's own name), as records name it. */
export type ScoringEngine = string;

/** One sequence to score: the completion's tokens are scored given the prompt and earlier completion tokens. */
export interface TokenScoreRequest {
  /** At least one token. */
  promptIds: readonly number[];
  /** At least one token. */
  completionIds: readonly number[];
}

/** One candidate of a position's distribution. */
export interface ScoredCandidate {
  tokenId: number;
  logprob: number;
}

/** Scores of one request's completion tokens. */
export interface CompletionScores {
  /** log p of each completion token, at the scorer's temperature, over the whole vocabulary. */
  logprobs: number[];
  /** Per completion token, the `topK` most likely tokens, best first (when topK > 0). */
  top?: ScoredCandidate[][];
}

export interface ScoreOptions {
  /**
   * Temperature of the logprobs. Servers score at temperature 1 whatever the request says (see
   * `fixedLogprobTemperature`); asking one of them for another temperature is an error.
   */
  temperature: number;
  /** Most likely tokens to return per completion position. 0 = none. */
  topK: number;
  signal?: AbortSignal;
}

/** What the scorer's own tokenizer makes of token ids, for checking two tokenizers agree. */
export interface TokenProbe {
  /** Text of each probed id as the scorer decodes it, null where it reported none. */
  texts: Array<string | null>;
}

export interface TokenScorer {
  readonly engine: ScoringEngine;
  /** The model id recorded with the scores. */
  readonly modelId: string;
  /** Where it is served (model directory or server URL), for messages. */
  readonly location: string;
  /** Random-weight model: every record and report using its scores must say so. */
  readonly dummyWeights: boolean;
  /** Its tokenizer, when it can be loaded here: an in-process model's directory, a served model's configured copy. */
  readonly tokenizer?: TokenizerSource;
  /** Its tokenizer's fingerprint as configured (a served model), compared with the student's before scoring. */
  readonly tokenizerFingerprint?: string;
  /**
   * Set when the engine computes logprobs at one temperature only: vLLM's `prompt_logprobs` and
   * SGLang's input logprobs are log-softmax of the raw logits (temperature 1), whatever the
   * request's `temperature` (vLLM `--logprobs-mode` does not reach prompt logprobs; slime #2319).
   */
  readonly fixedLogprobTemperature?: number;
  /** Scores every request (in order). */
  score(requests: readonly TokenScoreRequest[], options: ScoreOptions): Promise<CompletionScores[]>;
  /**
   * Decodes token ids the way the server's own tokenizer does (a served scorer asks its server).
   * Absent for in-process models: their tokenizer is read here, and a fingerprint settles it.
   */
  probe?(tokenIds: readonly number[], signal?: AbortSignal): Promise<TokenProbe>;
  close(): Promise<void>;
}
