import type { ChatTokenizer } from '../../text/chat-tokenizer';
import { checkTokenizerAgreement, type TokenizerAgreement } from '../scoring/tokenizer-agreement';
import type { TokenSampler } from './token-sampler';

/**
 * Token-exact sampling sends ids of a local tokenizer to the sampler: both must read them as the
 * same text. A sampler that can be probed (a served model: vLLM `prompt_logprobs` with
 * `decoded_token`, SGLang `return_text_in_logprobs`) is asked for the distill probe's texts:
 * ordinary text, CJK, emoji, the template's special tokens and the largest id; one whose own
 * tokenizer was loaded (`samplerFingerprint`) is compared by fingerprint too. Throws
 * `TOKENIZER_MISMATCH`, or `TOKENIZER_UNVERIFIED` when neither can be done (exit 2).
 */
export async function checkSamplerTokenizer(
  sampler: TokenSampler,
  tokenizer: ChatTokenizer,
  options: { label: string; tokenizerLabel: string; samplerFingerprint?: string; signal?: AbortSignal },
): Promise<TokenizerAgreement> {
  return checkTokenizerAgreement({
    student: { label: options.tokenizerLabel, tokenizer },
    teacher: {
      label: options.label,
      ...(options.samplerFingerprint !== undefined ? { fingerprint: options.samplerFingerprint } : {}),
      scorer: sampler,
    },
    signal: options.signal,
  });
}
