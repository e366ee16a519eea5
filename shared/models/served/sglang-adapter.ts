import { sglangScoringApi } from '../scoring/sglang-generate-logprobs';
import { sglangSamplingApi } from '../token-exact/served-token-sampler';
import { servedModelAdapter } from './served-adapter';

/**
 * `adapter: sglang`: an SGLang server sampled token-exact through `/generate` with `input_ids`
 * (rl's policy, distill's student) and scoring through its input logprobs (distill's teacher).
 */
export const sglangAdapter = servedModelAdapter('sglang', { sampling: sglangSamplingApi, scoring: sglangScoringApi });
