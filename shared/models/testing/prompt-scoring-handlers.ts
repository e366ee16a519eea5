/**
 * Token-level scoring endpoints of inference servers, as the test server serves them:
 * vLLM's `POST /v1/completions` with a token-id `prompt` and `prompt_logprobs`, and SGLang's
 * `POST /generate` with `input_ids` and `return_logprob`. The model behind them is pluggable
 * (a test supplies a table; `onnx-prompt-scorer.ts` plugs in an ONNX decoder).
 *
 * Temperature semantics follow the servers (slime #2085/#2319): vLLM's `prompt_logprobs` and
 * sampled-token logprobs are log-softmax of the raw logits (its default `--logprobs-mode
 * raw_logprobs`), and SGLang's input logprobs are too, whatever the request's temperature;
 * SGLang's output logprobs follow the sampling temperature.
 */

/** One candidate token and its log-probability. */
export interface TopToken {
  tokenId: number;
  logprob: number;
}

/** How the model scored the token at one prompt position, given everything before it. */
export interface PromptPositionScore {
  logprob: number;
  /** 1-based rank of this token in the model's distribution at this position. */
  rank: number;
  /** The most likely tokens at this position, best first. */
  top: TopToken[];
}

export interface PromptScores {
  /** One entry per prompt token; the first is null (nothing precedes it). */
  positions: Array<PromptPositionScore | null>;
  /** Distribution after the last prompt token, best first (enables greedy generation). */
  next?: TopToken[];
}

/** The model behind the scoring endpoints. */
export interface PromptScorer {
  score(
    tokenIds: readonly number[],
    options: { topK: number; temperature: number },
  ): PromptScores | Promise<PromptScores>;
  /** Text of a token, for `decoded_token` / SGLang's text field. Default `<id>`. */
  decode?(tokenId: number): string;
}

/** A handler answers with a status and a JSON body. */
export interface JsonReply {
  status: number;
  body: unknown;
}

interface GeneratedToken {
  tokenId: number;
  logprob: number;
  top: TopToken[];
}

/**
 * Greedy continuation: each step rescores prompt + generated so far and takes the best next
 * token. `promptScores` (the prompt scored at this temperature with at least `topK` candidates)
 * saves the first pass.
 */
async function generateGreedy(
  scorer: PromptScorer,
  prompt: readonly number[],
  maxNewTokens: number,
  topK: number,
  temperature: number,
  promptScores?: PromptScores,
  stopTokenIds: readonly number[] = [],
): Promise<GeneratedToken[]> {
  const generated: GeneratedToken[] = [];
  const sequence = [...prompt];
  for (let step = 0; step < maxNewTokens; step++) {
    const reusable = step === 0 && promptScores?.next !== undefined && promptScores.next.length >= Math.max(1, topK);
    const scores = reusable ? promptScores : await scorer.score(sequence, { topK: Math.max(1, topK), temperature });
    const best = scores.next?.[0];
    if (!best) break;
    generated.push({ tokenId: best.tokenId, logprob: best.logprob, top: (scores.next ?? []).slice(0, topK) });
    sequence.push(best.tokenId);
    // As vLLM and SGLang: a stop token ends the sequence and stays its last token.
    if (stopTokenIds.includes(best.tokenId)) break;
  }
  return generated;
}

/** `stop_token_ids` of a request, when it is a list of token ids. */
function stopTokenIdsOf(value: unknown): number[] {
  return isTokenIds(value) ? value : [];
}

/** vLLM and SGLang: `stop` when the last generated token is a stop token, else `length`. */
function finishOf(generated: readonly GeneratedToken[], stopTokenIds: readonly number[]): 'stop' | 'length' {
  const last = generated[generated.length - 1];
  return last !== undefined && stopTokenIds.includes(last.tokenId) ? 'stop' : 'length';
}

function decodeWith(scorer: PromptScorer): (tokenId: number) => string {
  return (tokenId) => scorer.decode?.(tokenId) ?? `<${tokenId}>`;
}

function errorReply(status: number, message: string): JsonReply {
  return { status, body: { object: 'error', message, type: 'BadRequestError', code: status } };
}

function isTokenIds(value: unknown): value is number[] {
  return Array.isArray(value) && value.length > 0 && value.every((item) => Number.isInteger(item) && item >= 0);
}

function nonNegativeInteger(value: unknown, fallback: number): number | undefined {
  if (value === undefined || value === null) return fallback;
  return Number.isInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
}

/** vLLM's default `--max-logprobs`: larger `logprobs`/`prompt_logprobs` requests are refused, not truncated. */
export const vllmDefaultMaxLogprobs = 20;

/**
 * vLLM `/v1/completions` for token-id prompts: `prompt_logprobs` per position, optional greedy
 * tokens. As vLLM: `max_tokens` must be at least 1 unless `echo` is set (echo without
 * generation); `echo` puts the prompt before the generated text (and its tokens before the
 * generated ones in `logprobs`, the first with a null logprob); `prompt_token_ids` and
 * `token_ids` come back only with `return_token_ids`.
 */
export async function handleVllmCompletion(
  body: Record<string, unknown>,
  scorer: PromptScorer,
  requestId: string,
  model: string,
  maxLogprobs = vllmDefaultMaxLogprobs,
): Promise<JsonReply> {
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && Array.isArray(prompt[0])) prompt = prompt[0];
  if (!isTokenIds(prompt))
    return errorReply(400, 'this server scores token-id prompts only: send "prompt" as an array of token ids');
  const promptLogprobs =
    body.prompt_logprobs === undefined || body.prompt_logprobs === null
      ? undefined
      : nonNegativeInteger(body.prompt_logprobs, 0);
  if (body.prompt_logprobs !== undefined && body.prompt_logprobs !== null && promptLogprobs === undefined) {
    return errorReply(400, '"prompt_logprobs" must be a non-negative integer');
  }
  const echo = body.echo === true;
  const maxTokens = nonNegativeInteger(body.max_tokens, 16);
  const sampleLogprobs =
    body.logprobs === undefined || body.logprobs === null ? undefined : nonNegativeInteger(body.logprobs, 0);
  if (maxTokens === undefined) return errorReply(400, '"max_tokens" must be a non-negative integer');
  if (maxTokens < 1 && !echo) return errorReply(400, `max_tokens must be at least 1, got ${maxTokens}.`);
  if ((promptLogprobs ?? 0) > maxLogprobs)
    return errorReply(
      400,
      `Requested prompt logprobs of ${promptLogprobs}, which is greater than max allowed: ${maxLogprobs}`,
    );
  if ((sampleLogprobs ?? 0) > maxLogprobs)
    return errorReply(
      400,
      `Requested sample logprobs of ${sampleLogprobs}, which is greater than max allowed: ${maxLogprobs}`,
    );
  const returnTokenIds = body.return_token_ids === true;
  const stopTokenIds = stopTokenIdsOf(body.stop_token_ids);
  const decodeText = decodeWith(scorer);
  // vLLM's `return_tokens_as_token_ids`: logprob tokens (and top-logprob keys) read `token_id:<id>`.
  const asTokenIds = body.return_tokens_as_token_ids === true;
  const decode = asTokenIds ? (tokenId: number) => `token_id:${tokenId}` : decodeText;
  const topK = Math.max(promptLogprobs ?? 0, sampleLogprobs ?? 0);
  // Raw logprobs (vLLM's default logprobs mode): the request's temperature does not change them.
  const scores = await scorer.score(prompt, { topK, temperature: 1 });
  const generated = await generateGreedy(scorer, prompt, maxTokens, sampleLogprobs ?? 0, 1, scores, stopTokenIds);
  const promptText = echo ? prompt.map((tokenId) => decodeText(tokenId)).join('') : '';
  const text = promptText + generated.map((token) => decodeText(token.tokenId)).join('');
  const promptLogprobEntries =
    promptLogprobs === undefined
      ? null
      : prompt.map((tokenId, position) => {
          const score = scores.positions[position];
          if (!score) return null;
          const entries: Record<string, { logprob: number; rank: number; decoded_token: string }> = {
            [String(tokenId)]: { logprob: score.logprob, rank: score.rank, decoded_token: decodeText(tokenId) },
          };
          score.top.slice(0, promptLogprobs).forEach((candidate, index) => {
            entries[String(candidate.tokenId)] ??= {
              logprob: candidate.logprob,
              rank: index + 1,
              decoded_token: decodeText(candidate.tokenId),
            };
          });
          return entries;
        });
  // Echoed prompt tokens first: the first has no logprob (nothing precedes it).
  const logprobTokens: Array<{ tokenId: number; logprob: number | null; top: TopToken[] | null }> = [
    ...(echo
      ? prompt.map((tokenId, position) => ({
          tokenId,
          logprob: scores.positions[position]?.logprob ?? null,
          top: scores.positions[position]?.top ?? null,
        }))
      : []),
    ...generated,
  ];
  let offset = 0;
  const logprobs =
    sampleLogprobs === undefined
      ? null
      : {
          tokens: logprobTokens.map((token) => decode(token.tokenId)),
          token_logprobs: logprobTokens.map((token) => token.logprob),
          top_logprobs: logprobTokens.map((token) =>
            token.top === null
              ? null
              : Object.fromEntries(
                  token.top.slice(0, sampleLogprobs).map((candidate) => [decode(candidate.tokenId), candidate.logprob]),
                ),
          ),
          text_offset: logprobTokens.map((token) => {
            const at = offset;
            offset += decodeText(token.tokenId).length;
            return at;
          }),
        };
  return {
    status: 200,
    body: {
      id: requestId,
      object: 'text_completion',
      created: 0,
      model,
      choices: [
        {
          index: 0,
          text,
          logprobs,
          finish_reason: finishOf(generated, stopTokenIds),
          stop_reason: finishOf(generated, stopTokenIds) === 'stop' ? generated[generated.length - 1].tokenId : null,
          prompt_logprobs: promptLogprobEntries,
          prompt_token_ids: returnTokenIds ? prompt : null,
          token_ids: returnTokenIds ? generated.map((token) => token.tokenId) : null,
        },
      ],
      usage: {
        prompt_tokens: prompt.length,
        completion_tokens: generated.length,
        total_tokens: prompt.length + generated.length,
      },
    },
  };
}

/**
 * SGLang's checks of `sampling_params` (python/sglang/srt/sampling/sampling_params.py): a
 * temperature below 1e-6 means greedy, run as top_k 1 at temperature 1 (so its logprobs are raw);
 * `top_k` is -1 (whole vocabulary) or at least 1; `top_p` in (0, 1]; temperature non-negative.
 */
function sglangSamplingChecks(sampling: Record<string, unknown>): { temperature: number } | string {
  const temperature = typeof sampling.temperature === 'number' ? sampling.temperature : 1;
  const topK = typeof sampling.top_k === 'number' ? sampling.top_k : -1;
  const topP = typeof sampling.top_p === 'number' ? sampling.top_p : 1;
  if (!Number.isFinite(temperature) || temperature < 0)
    return `temperature must be a non-negative finite number, got ${temperature}.`;
  if (!(topP > 0 && topP <= 1)) return `top_p must be in (0, 1], got ${topP}.`;
  if (topK !== -1 && !(Number.isInteger(topK) && topK >= 1))
    return `top_k must be -1 (disable) or at least 1, got ${topK}.`;
  return { temperature: temperature < 1e-6 ? 1 : temperature };
}

/** SGLang `/generate` with `input_ids` (one prompt or a batch). */
export async function handleSglangGenerate(
  body: Record<string, unknown>,
  scorer: PromptScorer,
  requestId: string,
): Promise<JsonReply> {
  const inputIds = body.input_ids;
  const batch = Array.isArray(inputIds) && inputIds.length > 0 && inputIds.every(Array.isArray);
  const prompts = batch ? (inputIds as unknown[]) : [inputIds];
  if (!prompts.every(isTokenIds))
    return errorReply(
      400,
      'send "input_ids" as an array of token ids (or a batch of them); text prompts are not supported here',
    );
  const sampling = (body.sampling_params ?? {}) as Record<string, unknown>;
  const maxNewTokens = nonNegativeInteger(sampling.max_new_tokens, 128);
  if (maxNewTokens === undefined)
    return errorReply(400, '"sampling_params.max_new_tokens" must be a non-negative integer');
  const checked = sglangSamplingChecks(sampling);
  if (typeof checked === 'string') return errorReply(400, checked);
  const { temperature } = checked;
  const returnLogprob = body.return_logprob === true;
  const startLength = typeof body.logprob_start_len === 'number' ? body.logprob_start_len : -1;
  const topNumber = nonNegativeInteger(body.top_logprobs_num, 0) ?? 0;
  const withText = body.return_text_in_logprobs === true;
  const decode = decodeWith(scorer);
  const triple = (logprob: number | null, tokenId: number): [number | null, number, string | null] => [
    logprob,
    tokenId,
    withText ? decode(tokenId) : null,
  ];
  const results = [];
  for (const [index, prompt] of prompts.entries()) {
    // Input logprobs are log-softmax of the raw logits: sampling temperature does not reach them.
    const scores = await scorer.score(prompt, { topK: topNumber, temperature: 1 });
    const generated = await generateGreedy(
      scorer,
      prompt,
      maxNewTokens,
      topNumber,
      temperature,
      undefined,
      stopTokenIdsOf(sampling.stop_token_ids),
    );
    const start = startLength < 0 ? prompt.length : Math.min(startLength, prompt.length);
    const metaLogprobs = returnLogprob
      ? {
          input_token_logprobs: prompt
            .slice(start)
            .map((tokenId, offset) => triple(scores.positions[start + offset]?.logprob ?? null, tokenId)),
          input_top_logprobs: prompt.slice(start).map((_, offset) => {
            const score = scores.positions[start + offset];
            return score && topNumber > 0
              ? score.top.slice(0, topNumber).map((candidate) => triple(candidate.logprob, candidate.tokenId))
              : null;
          }),
          output_token_logprobs: generated.map((token) => triple(token.logprob, token.tokenId)),
          output_top_logprobs: generated.map((token) =>
            topNumber > 0
              ? token.top.slice(0, topNumber).map((candidate) => triple(candidate.logprob, candidate.tokenId))
              : null,
          ),
        }
      : {};
    results.push({
      text: generated.map((token) => decode(token.tokenId)).join(''),
      output_ids: generated.map((token) => token.tokenId),
      meta_info: {
        id: batch ? `${requestId}-${index}` : requestId,
        finish_reason:
          finishOf(generated, stopTokenIdsOf(sampling.stop_token_ids)) === 'stop'
            ? { type: 'stop', matched: generated[generated.length - 1].tokenId }
            : { type: 'length', length: generated.length },
        prompt_tokens: prompt.length,
        completion_tokens: generated.length,
        cached_tokens: 0,
        ...metaLogprobs,
      },
    });
  }
  return { status: 200, body: batch ? results : results[0] };
}

/** llama-server's request errors: `{error: {code, message, type}}`. */
function llamaCppError(message: string): JsonReply {
  return { status: 400, body: { error: { code: 400, message, type: 'invalid_request_error' } } };
}

/**
 * llama-server's `POST /completion` for token-id prompts (llama.cpp tools/server/README.md):
 * `prompt` as token ids, `n_predict`, `n_probs` (each generated token with its logprob and the top
 * N, from the softmax of the raw logits: this server has no `post_sampling_probs`),
 * `return_tokens` (the generated ids in `tokens`). Generation stops at the model's
 * end-of-generation ids (llama-server takes no stop ids per request) and keeps that id among the
 * tokens, as llama-server does; `stop_type` is `eos` or `limit`. Greedy, like every endpoint here.
 */
export async function handleLlamaCppCompletion(
  body: Record<string, unknown>,
  scorer: PromptScorer,
  endOfGenerationIds: readonly number[],
): Promise<JsonReply> {
  const prompt = body.prompt;
  if (!isTokenIds(prompt)) return llamaCppError('this server takes token-id prompts only: send "prompt" as token ids');
  const requested = body.n_predict === undefined ? -1 : body.n_predict;
  if (!Number.isInteger(requested) || (requested as number) < -1)
    return llamaCppError('"n_predict" must be -1 or a non-negative integer');
  const nPredict = requested === -1 ? 128 : (requested as number);
  const nProbs = nonNegativeInteger(body.n_probs, 0) ?? 0;
  const decode = decodeWith(scorer);
  const generated = await generateGreedy(scorer, prompt, nPredict, nProbs, 1, undefined, endOfGenerationIds);
  const last = generated[generated.length - 1];
  const stopped = last !== undefined && endOfGenerationIds.includes(last.tokenId);
  const shown = stopped ? generated.slice(0, -1) : generated;
  const candidate = (tokenId: number, logprob: number) => ({
    id: tokenId,
    token: decode(tokenId),
    bytes: [...Buffer.from(decode(tokenId), 'utf8')],
    logprob,
  });
  return {
    status: 200,
    body: {
      content: shown.map((token) => decode(token.tokenId)).join(''),
      tokens: body.return_tokens === true ? generated.map((token) => token.tokenId) : [],
      ...(nProbs > 0
        ? {
            completion_probabilities: generated.map((token) => ({
              ...candidate(token.tokenId, token.logprob),
              top_logprobs: token.top.map((top) => candidate(top.tokenId, top.logprob)),
            })),
          }
        : {}),
      stop: true,
      stop_type: stopped ? 'eos' : 'limit',
      stopping_word: '',
      tokens_cached: 0,
      tokens_evaluated: prompt.length,
      truncated: false,
    },
  };
}

/** llama-server's `POST /detokenize`: `tokens` in, their text as `content`. */
export function handleLlamaCppDetokenize(body: Record<string, unknown>, scorer: PromptScorer): JsonReply {
  const tokens = body.tokens;
  if (!Array.isArray(tokens) || !tokens.every((item) => Number.isInteger(item) && item >= 0))
    return llamaCppError('"tokens" must be an array of token ids');
  const decode = decodeWith(scorer);
  return { status: 200, body: { content: (tokens as number[]).map((tokenId) => decode(tokenId)).join('') } };
}
