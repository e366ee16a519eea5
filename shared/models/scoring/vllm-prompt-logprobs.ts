import { RemoteTokenScorer, type ScoringApi } from './remote-token-scorer';
import { scoringShapeError, type RemoteScorerConfig, type ScoringEndpointDependencies } from './scoring-endpoint';
import type { CompletionScores, ScoredCandidate, TokenScoreRequest } from './token-scorer';

/**
 * vLLM's token scoring: `POST /v1/completions` with the token ids as `prompt` and
 * `prompt_logprobs: k`. Each choice carries `prompt_logprobs`, one entry per prompt position:
 * `null` for the first (nothing precedes it), else an object keyed by token id (as a string)
 * holding the prompt's own token and the k most likely ones, each `{logprob, rank,
 * decoded_token}` (so k or k + 1 entries). vLLM refuses `max_tokens: 0` unless `echo` is set
 * (its "echo without generation"), so by default one token is generated and ignored.
 * The logprobs are log-softmax of the raw logits: temperature 1, whatever `temperature` says.
 */

/** One entry of a `prompt_logprobs` position. */
export interface VllmLogprobEntry {
  logprob: number;
  rank?: number | null;
  decoded_token?: string | null;
}

export type VllmPromptLogprobs = Array<Record<string, VllmLogprobEntry> | null>;

/** The request body that scores `tokenIds` (all of them form the prompt). */
export function vllmScoringRequest(
  model: string,
  tokenIds: readonly number[],
  topK: number,
  echoWithoutGeneration: boolean,
): Record<string, unknown> {
  return {
    model,
    prompt: [...tokenIds],
    // Ignored by prompt_logprobs (raw logits); sent so the one generated token is an ordinary sample.
    temperature: 1,
    prompt_logprobs: topK,
    ...(echoWithoutGeneration ? { echo: true, max_tokens: 0 } : { max_tokens: 1 }),
  };
}

/** `choices[0].prompt_logprobs` of a response, checked to cover `length` positions. */
export function vllmPromptLogprobsOf(body: unknown, length: number, url: string): VllmPromptLogprobs {
  const choice = (body as { choices?: unknown } | null)?.choices;
  const first = Array.isArray(choice) ? (choice[0] as { prompt_logprobs?: unknown } | undefined) : undefined;
  const entries = first?.prompt_logprobs;
  if (!Array.isArray(entries))
    throw scoringShapeError(
      url,
      'vllm',
      "choices[0].prompt_logprobs is missing; the server must support vLLM's prompt_logprobs",
    );
  if (entries.length !== length)
    throw scoringShapeError(
      url,
      'vllm',
      `choices[0].prompt_logprobs has ${entries.length} positions for ${length} prompt tokens`,
    );
  return entries as VllmPromptLogprobs;
}

/** Scores of the completion tokens (the last `completionIds.length` positions) from `prompt_logprobs`. */
export function completionScoresFromVllm(
  entries: VllmPromptLogprobs,
  request: TokenScoreRequest,
  topK: number,
  url: string,
): CompletionScores {
  const start = request.promptIds.length;
  const logprobs: number[] = [];
  const top: ScoredCandidate[][] = [];
  request.completionIds.forEach((tokenId, offset) => {
    const position = entries[start + offset];
    const own = position?.[String(tokenId)];
    if (!position || typeof own?.logprob !== 'number') {
      throw scoringShapeError(url, 'vllm', `prompt_logprobs[${start + offset}] has no entry for token id ${tokenId}`);
    }
    logprobs.push(own.logprob);
    if (topK > 0) top.push(topCandidates(position, topK));
  });
  return topK > 0 ? { logprobs, top } : { logprobs };
}

/** The k best candidates of a position, by rank then logprob: the prompt's own token drops out when it ranks below k. */
function topCandidates(position: Record<string, VllmLogprobEntry>, topK: number): ScoredCandidate[] {
  return Object.entries(position)
    .map(([id, entry]) => ({
      tokenId: Number(id),
      logprob: entry.logprob,
      rank: entry.rank ?? Number.POSITIVE_INFINITY,
    }))
    .sort((left, right) => left.rank - right.rank || right.logprob - left.logprob || left.tokenId - right.tokenId)
    .slice(0, topK)
    .map(({ tokenId, logprob }) => ({ tokenId, logprob }));
}

/** vLLM's scoring API. `decoded_token` gives the probe's texts (the first position has none: nothing precedes it). */
export const vllmScoringApi: ScoringApi = {
  engine: 'vllm',
  path: '/v1/completions',
  requestBody: (config, tokenIds, topK) =>
    vllmScoringRequest(config.model, tokenIds, topK, config.echoWithoutGeneration),
  completionScores: (body, request, topK, url) =>
    completionScoresFromVllm(
      vllmPromptLogprobsOf(body, request.promptIds.length + request.completionIds.length, url),
      request,
      topK,
      url,
    ),
  tokenTexts: (body, tokenIds, url) => {
    const entries = vllmPromptLogprobsOf(body, tokenIds.length, url);
    return tokenIds.map((tokenId, position) => entries[position]?.[String(tokenId)]?.decoded_token ?? null);
  },
};

/** A teacher served by vLLM. */
export class VllmTokenScorer extends RemoteTokenScorer {
  constructor(config: RemoteScorerConfig, dependencies: ScoringEndpointDependencies = {}) {
    super(vllmScoringApi, config, dependencies);
  }
}
