import { vllmScoringApi } from '../scoring/vllm-prompt-logprobs';
import { vllmSamplingApi } from '../token-exact/served-token-sampler';
import { servedModelAdapter } from './served-adapter';

/**
 * `adapter: vllm`: a vLLM server sampled token-exact through `/v1/completions` with token-id
 * prompts (rl's policy, distill's student) and scoring through `prompt_logprobs` (distill's teacher).
 */
export const vllmAdapter = servedModelAdapter('vllm', { sampling: vllmSamplingApi, scoring: vllmScoringApi });
