import type { RemoteScorerConfig, ScoringEndpointDependencies } from './scoring-endpoint';
import { SglangTokenScorer } from './sglang-generate-logprobs';
import type { TokenScorer } from './token-scorer';
import { VllmTokenScorer } from './vllm-prompt-logprobs';

/** The scorer of a server by its `engine`. */
export function createRemoteScorer(
  config: RemoteScorerConfig,
  dependencies: ScoringEndpointDependencies = {},
): TokenScorer {
  return config.engine === 'vllm'
    ? new VllmTokenScorer(config, dependencies)
    : new SglangTokenScorer(config, dependencies);
}
