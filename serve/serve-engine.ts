import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { GenerationResult, TokenScore } from '../shared/models/onnx/onnx-decoder';
import { logprobTemperatureOf } from '../shared/models/onnx/token-sampler';
import type { GenerationScheduler } from './generation-scheduler';
import type { ServeMetrics } from './serve-metrics';
import type { ServedModel } from './serve-model';
import { ServeRequestError } from './serve-errors';
import type { ToolCallParser } from '../shared/text/tool-parsers';

/**
 * Which distribution logprobs are of, as vLLM's `--logprobs-mode`: `raw_logprobs` (default):
 * log-softmax of the model's logits, before temperature and top-k/top-p; `processed_logprobs`:
 * after temperature and top-k/top-p (tokens outside the kept set are -inf, sent as -9999.0).
 */
export const logprobsModes = ['raw_logprobs', 'processed_logprobs'] as const;
export type LogprobsMode = (typeof logprobsModes)[number];

/** Most alternatives tracked per token to find a top-p nucleus for processed_logprobs. */
export const processedNucleusLimit = 1024;

/** vLLM writes -inf logprobs as this (JSON has no infinity). */
export const minimumLogprob = -9999.0;

/** One generated token with its logprob and alternatives in the server's logprobs mode. */
export interface ServedToken {
  tokenId: number;
  logprob: number;
  /** Most likely first; empty unless top logprobs were asked for. */
  top: Array<{ tokenId: number; logprob: number }>;
}

export interface ServeGenerationRequest {
  promptIds: number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  /** 0 or -1: off. */
  topK: number;
  seed?: number;
  /** Alternatives per token (0: the sampled token only). */
  topLogprobs: number;
  /** Stop strings: the text ends before the first one found (finish_reason stop, stop_reason the string). */
  stop: string[];
  /** Extra token ids that end generation (stop_reason the id). */
  stopTokenIds: number[];
  ignoreEos: boolean;
  includeStopStringInOutput: boolean;
  /** Keep special tokens in the text (vLLM `skip_special_tokens: false`). Default false. */
  keepSpecialTokens?: boolean;
  /**
   * Every generated token as it is chosen, with the visible text it adds (for streaming): ''
   * while a multi-byte character is incomplete or after a stop string; `last` on the final token.
   */
  onToken?: (event: { delta: string; token: ServedToken; last: boolean }) => void;
  /** Aborts when the client goes away: the row stops at its next token. */
  signal?: AbortSignal;
}

export interface ServeGeneration {
  promptIds: number[];
  tokenIds: number[];
  /** Generated text with special tokens skipped, cut at a stop string. */
  text: string;
  tokens: ServedToken[];
  finishReason: 'stop' | 'length';
  stopReason: string | number | null;
  seed: string;
  aborted: boolean;
}

/** Everything a request handler needs: the model, its scheduler, metrics and the logprobs mode. */
export interface ServeContext {
  served: ServedModel;
  scheduler: GenerationScheduler;
  metrics: ServeMetrics;
  logprobsMode: LogprobsMode;
  maxLogprobs: number;
  /** The generated model's random weights: labelled in `/v1/models`. */
  dummyWeights: boolean;
  /** Parser of the template's tool-call format; null: tool calls are not parsed (text stays content). */
  toolParser: ToolCallParser | null;
}

/** Runs one generation through the scheduler and records its metrics. */
export async function runGeneration(context: ServeContext, request: ServeGenerationRequest): Promise<ServeGeneration> {
  const { model } = context.served;
  const received = performance.now();
  const topK = request.topK > 0 ? request.topK : 0;
  const processed = context.logprobsMode === 'processed_logprobs';
  if (request.maxTokens < 1)
    throw new ServeRequestError(400, `max_tokens must be at least 1, got ${request.maxTokens}.`, 'max_tokens');
  const maxModelLength = context.served.maxModelLength;
  if (maxModelLength !== null && request.promptIds.length + request.maxTokens > maxModelLength) {
    throw new ServeRequestError(
      400,
      `This model's maximum context length is ${maxModelLength} tokens. However, you requested ${request.promptIds.length + request.maxTokens} tokens (${request.promptIds.length} in the messages, ${request.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      'max_tokens',
    );
  }
  const vocabularySize = model.decoder.info.vocabularySize;
  const badId = request.promptIds.find(
    (tokenId) => !Number.isInteger(tokenId) || tokenId < 0 || tokenId >= vocabularySize,
  );
  if (badId !== undefined)
    throw new ServeRequestError(400, `Token id ${badId} is out of vocabulary [0, ${vocabularySize})`, 'prompt');
  if (request.promptIds.length === 0)
    throw new ServeRequestError(400, 'The prompt is empty: give at least one token', 'prompt');

  const eos = request.ignoreEos ? [] : model.decoder.info.eosTokenIds;
  const stopTokenIds = [...new Set([...eos, ...request.stopTokenIds])];
  const stops = request.stop.filter((stop) => stop.length > 0);
  const generatedIds: number[] = [];
  const tokenTimes: number[] = [];
  let startedAt = received;
  let emitted = '';
  let stopAt: { index: number; stop: string } | undefined;
  const visibleText = (text: string): string =>
    stopAt ? text.slice(0, stopAt.index + (request.includeStopStringInOutput ? stopAt.stop.length : 0)) : text;
  const seed = request.seed === undefined ? randomUUID() : String(request.seed);
  const truncation = { topK, topP: request.topP };
  let failure: unknown;
  let result: GenerationResult;
  try {
    result = await context.scheduler.generate({
      promptIds: request.promptIds,
      seed,
      settings: {
        maxNewTokens: request.maxTokens,
        temperature: request.temperature,
        topP: request.topP,
        topK,
        // processed_logprobs need the kept set's mass: the top k, or enough alternatives to hold the nucleus.
        topLogprobs:
          processed && (topK > 0 || request.topP < 1)
            ? Math.max(topK > 0 ? topK : processedNucleusLimit, request.topLogprobs)
            : request.topLogprobs,
        stopTokenIds,
      },
      onStart: () => {
        startedAt = performance.now();
      },
      onToken: (tokenId, score) => {
        tokenTimes.push(performance.now());
        generatedIds.push(tokenId);
        const text = model.tokenizer.decode(generatedIds, { keepSpecialTokens: request.keepSpecialTokens === true });
        if (stops.length > 0 && !stopAt) stopAt = firstStop(text, stops);
        const last = stopAt !== undefined || stopTokenIds.includes(tokenId) || generatedIds.length >= request.maxTokens;
        // A trailing U+FFFD may be half a multi-byte character: wait for the rest unless this is the end.
        const visible = text.endsWith('\uFFFD') && !last ? emitted : visibleText(text);
        const delta = visible.startsWith(emitted) ? visible.slice(emitted.length) : '';
        emitted = visible;
        if (request.onToken && score && !failure) {
          try {
            request.onToken({
              delta,
              token: servedToken(
                score,
                logprobTemperatureOf(request.temperature),
                context.logprobsMode,
                truncation,
                request.topLogprobs,
              ),
              last,
            });
          } catch (error) {
            // Thrown in the decoder's loop it would fail every row of the batch: this row stops instead.
            failure = error;
          }
        }
      },
      shouldStop: () => stopAt !== undefined || failure !== undefined || request.signal?.aborted === true,
    });
  } catch (error) {
    throw ServeRequestError.from(error);
  }
  if (failure) throw failure;
  const finished = performance.now();
  const lastId = result.tokenIds[result.tokenIds.length - 1];
  const stopReason = stopAt
    ? stopAt.stop
    : lastId !== undefined && request.stopTokenIds.includes(lastId) && !eos.includes(lastId)
      ? lastId
      : null;
  const aborted = request.signal?.aborted === true;
  context.metrics.record({
    promptTokens: request.promptIds.length,
    generationTokens: result.tokenIds.length,
    finishReason: aborted ? 'abort' : result.finishReason,
    queueSeconds: (startedAt - received) / 1000,
    ttftSeconds: tokenTimes[0] === undefined ? undefined : (tokenTimes[0] - received) / 1000,
    e2eSeconds: (finished - received) / 1000,
    tokenGapsSeconds: tokenTimes.slice(1).map((time, index) => (time - tokenTimes[index]) / 1000),
  });
  const requestedTop = request.topLogprobs;
  const tokens = (result.tokens ?? []).map((token) =>
    servedToken(token, result.logprobTemperature, context.logprobsMode, truncation, requestedTop),
  );
  return {
    promptIds: request.promptIds,
    tokenIds: result.tokenIds,
    text: visibleText(
      model.tokenizer.decode(result.tokenIds, { keepSpecialTokens: request.keepSpecialTokens === true }),
    ),
    tokens,
    finishReason: result.finishReason,
    stopReason,
    seed,
    aborted,
  };
}

/**
 * A token's logprobs in the server's mode. The decoder reports the sampled token at the
 * sampling temperature T and at temperature 1, and alternatives at T; raw alternatives follow
 * from logits being T × tempered logprobs up to a constant: raw_i = raw_s + T (tempered_i - tempered_s).
 */
export function servedToken(
  token: TokenScore,
  temperature: number,
  mode: LogprobsMode,
  truncation: { topK: number; topP: number },
  topLogprobs: number,
): ServedToken {
  const top = token.top ?? [];
  if (mode === 'raw_logprobs') {
    const toRaw = (tempered: number): number =>
      temperature === 1 ? tempered : token.rawLogprob + temperature * (tempered - token.logprob);
    return {
      tokenId: token.tokenId,
      logprob: token.rawLogprob,
      top: top.slice(0, topLogprobs).map((entry) => ({ tokenId: entry.tokenId, logprob: toRaw(entry.logprob) })),
    };
  }
  if (truncation.topK === 0 && truncation.topP >= 1)
    return {
      tokenId: token.tokenId,
      logprob: token.logprob,
      top: top.slice(0, topLogprobs).map((entry) => ({ ...entry })),
    };
  // Renormalized over the kept set, found as the sampler finds it: the top k, then the shortest
  // prefix holding top_p of their mass (of the whole vocabulary's when top-k is off).
  let kept = truncation.topK > 0 ? top.slice(0, truncation.topK) : top;
  if (truncation.topP < 1) {
    const target =
      truncation.topP * (truncation.topK > 0 ? kept.reduce((sum, entry) => sum + Math.exp(entry.logprob), 0) : 1);
    let mass = 0;
    const end = kept.findIndex((entry) => (mass += Math.exp(entry.logprob)) >= target);
    if (end < 0 && truncation.topK === 0) {
      throw new ServeRequestError(
        400,
        `processed_logprobs: the top_p ${truncation.topP} nucleus holds more than ${processedNucleusLimit} tokens at this step, more than hat serve tracks; lower top_p, add top_k, or use --logprobs-mode raw_logprobs`,
        'top_p',
      );
    }
    kept = end < 0 ? kept : kept.slice(0, end + 1);
  }
  const logMass = Math.log(kept.reduce((sum, entry) => sum + Math.exp(entry.logprob), 0));
  const keptIds = new Set(kept.map((entry) => entry.tokenId));
  const processed = (tokenId: number, tempered: number): number =>
    keptIds.has(tokenId) ? tempered - logMass : minimumLogprob;
  return {
    tokenId: token.tokenId,
    logprob: processed(token.tokenId, token.logprob),
    top: top
      .slice(0, topLogprobs)
      .map((entry) => ({ tokenId: entry.tokenId, logprob: processed(entry.tokenId, entry.logprob) })),
  };
}

function firstStop(text: string, stops: readonly string[]): { index: number; stop: string } | undefined {
  let first: { index: number; stop: string } | undefined;
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index >= 0 && (!first || index < first.index)) first = { index, stop };
  }
  return first;
}
