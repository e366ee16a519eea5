import { RemoteTokenScorer, type ScoringApi } from './remote-token-scorer';
import { scoringShapeError, type RemoteScorerConfig, type ScoringEndpointDependencies } from './scoring-endpoint';
import type { CompletionScores, ScoredCandidate, TokenScoreRequest } from './token-scorer';

/**
 * SGLang's token scoring: `POST /generate` with `input_ids`, `sampling_params.max_new_tokens: 0`,
 * `return_logprob: true` and `logprob_start_len: 0`. `meta_info.input_token_logprobs` holds one
 * `[logprob, token_id, text]` triple per input position from the start (the first logprob is
 * null), `meta_info.input_top_logprobs` a list of such triples (or null) per position when
 * `top_logprobs_num` is set; `text` is null unless `return_text_in_logprobs`. Input logprobs are
 * log-softmax of the raw logits (temperature 1): sampling temperature does not reach them.
 */

/** `[logprob, token_id, text]` as SGLang sends it. */
export type SglangLogprobTriple = [number | null, number, string | null];

export interface SglangInputLogprobs {
  tokens: SglangLogprobTriple[];
  top?: Array<SglangLogprobTriple[] | null>;
}

/** The request body that scores `tokenIds` (all of them are input). */
export function sglangScoringRequest(
  tokenIds: readonly number[],
  topK: number,
  withText: boolean,
): Record<string, unknown> {
  return {
    input_ids: [...tokenIds],
    sampling_params: { max_new_tokens: 0, temperature: 1 },
    return_logprob: true,
    logprob_start_len: 0,
    ...(topK > 0 ? { top_logprobs_num: topK } : {}),
    ...(withText ? { return_text_in_logprobs: true } : {}),
  };
}

function isTriple(value: unknown): value is SglangLogprobTriple {
  return (
    Array.isArray(value) &&
    value.length >= 2 &&
    (value[0] === null || typeof value[0] === 'number') &&
    Number.isInteger(value[1])
  );
}

/** `meta_info.input_token_logprobs` (and `input_top_logprobs`) of a response, checked to end with `tokenIds`. */
export function sglangInputLogprobsOf(body: unknown, tokenIds: readonly number[], url: string): SglangInputLogprobs {
  const meta = (body as { meta_info?: { input_token_logprobs?: unknown; input_top_logprobs?: unknown } } | null)
    ?.meta_info;
  const tokens = meta?.input_token_logprobs;
  if (!Array.isArray(tokens) || !tokens.every(isTriple)) {
    throw scoringShapeError(
      url,
      'sglang',
      'meta_info.input_token_logprobs is missing or not a list of [logprob, token_id, text] triples',
    );
  }
  // Positions are aligned from the end, which holds whatever logprob_start_len the server applied.
  const offset = tokens.length - tokenIds.length;
  if (offset < 0)
    throw scoringShapeError(
      url,
      'sglang',
      `meta_info.input_token_logprobs has ${tokens.length} positions for ${tokenIds.length} input ids`,
    );
  tokenIds.forEach((tokenId, index) => {
    const reported = tokens[offset + index][1];
    if (reported !== tokenId)
      throw scoringShapeError(
        url,
        'sglang',
        `input position ${index} reports token id ${reported}, but ${tokenId} was sent`,
      );
  });
  const top = Array.isArray(meta?.input_top_logprobs)
    ? (meta.input_top_logprobs as Array<SglangLogprobTriple[] | null>).slice(-tokenIds.length)
    : undefined;
  return { tokens: tokens.slice(offset), ...(top ? { top } : {}) };
}

/** Scores of the completion tokens (the last `completionIds.length` input positions). */
export function completionScoresFromSglang(
  input: SglangInputLogprobs,
  request: TokenScoreRequest,
  topK: number,
  url: string,
): CompletionScores {
  const start = request.promptIds.length;
  const logprobs: number[] = [];
  const top: ScoredCandidate[][] = [];
  request.completionIds.forEach((tokenId, offset) => {
    const [logprob] = input.tokens[start + offset];
    if (typeof logprob !== 'number')
      throw scoringShapeError(url, 'sglang', `input position ${start + offset} (token ${tokenId}) has no logprob`);
    logprobs.push(logprob);
    if (topK > 0) {
      const candidates = input.top?.[start + offset];
      if (!Array.isArray(candidates))
        throw scoringShapeError(
          url,
          'sglang',
          `meta_info.input_top_logprobs[${start + offset}] is missing though top_logprobs_num was ${topK}`,
        );
      top.push(
        candidates
          .filter(isTriple)
          .slice(0, topK)
          .map(([candidateLogprob, candidateId]) => ({ tokenId: candidateId, logprob: candidateLogprob as number })),
      );
    }
  });
  return topK > 0 ? { logprobs, top } : { logprobs };
}

/** SGLang's scoring API. `return_text_in_logprobs` gives the probe's texts. */
export const sglangScoringApi: ScoringApi = {
  engine: 'sglang',
  path: '/generate',
  requestBody: (_config, tokenIds, topK, withText) => sglangScoringRequest(tokenIds, topK, withText),
  completionScores: (body, request, topK, url) =>
    completionScoresFromSglang(
      sglangInputLogprobsOf(body, [...request.promptIds, ...request.completionIds], url),
      request,
      topK,
      url,
    ),
  tokenTexts: (body, tokenIds, url) =>
    sglangInputLogprobsOf(body, tokenIds, url).tokens.map(([, , text]) => (typeof text === 'string' ? text : null)),
};

/** A teacher served by SGLang. */
export class SglangTokenScorer extends RemoteTokenScorer {
  constructor(config: RemoteScorerConfig, dependencies: ScoringEndpointDependencies = {}) {
    super(sglangScoringApi, config, dependencies);
  }
}
