import type { ChatTokenizer } from '../../text/chat-tokenizer';
import { createRemoteScorer } from '../scoring/create-remote-scorer';
import type { ScoringEndpointDependencies } from '../scoring/scoring-endpoint';
import { checkTokenizerAgreement, type TokenizerAgreement } from '../scoring/tokenizer-agreement';
import type { ServedSamplerConfig } from './served-token-sampler';

/**
 * Token-exact sampling sends ids of a local tokenizer to the server: both must read them as the
 * same text. Probes the server through its scoring endpoint (vLLM `prompt_logprobs` with
 * `decoded_token`, SGLang `return_text_in_logprobs`) with the distill probe: ordinary text, CJK,
 * emoji, the template's special tokens and the largest id. Throws `TOKENIZER_MISMATCH` or
 * `TOKENIZER_UNVERIFIED` (exit 2).
 */
export async function checkServedTokenizer(
  config: ServedSamplerConfig,
  tokenizer: ChatTokenizer,
  options: ScoringEndpointDependencies & { label: string; tokenizerLabel: string; signal?: AbortSignal },
): Promise<TokenizerAgreement> {
  const { logprobsMode: _mode, toolCallParser: _parser, ...endpoint } = config;
  const scorer = createRemoteScorer(endpoint, options);
  try {
    return await checkTokenizerAgreement({
      student: { label: options.tokenizerLabel, tokenizer },
      teacher: { label: options.label, scorer },
      signal: options.signal,
    });
  } finally {
    await scorer.close();
  }
}
