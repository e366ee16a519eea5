import { z } from 'zod';
import { parseBody, samplingFieldsSchema, samplingSettingsOf } from './request-fields';
import {
  minimumLogprob,
  runGeneration,
  type ServeContext,
  type ServeGeneration,
  type ServedToken,
} from './serve-engine';
import { ServeRequestError } from './serve-errors';
import type { SseWriter } from './sse-writer';

const tokenIdList = z.array(z.number().int().min(0));

/** vLLM's CompletionRequest, the fields `hat serve` implements. */
export const completionRequestSchema = samplingFieldsSchema.extend({
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIdList.min(1), z.array(tokenIdList.min(1)).min(1)]),
  max_tokens: z.number().int().min(0).nullish(),
  logprobs: z.number().int().min(0).nullish(),
  prompt_logprobs: z.number().int().min(-1).nullish(),
  echo: z.boolean().nullish(),
  return_token_ids: z.boolean().nullish(),
});
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

/** One entry of vLLM's `prompt_logprobs`: the prompt token and the top k at a position. */
export type PromptLogprobEntry = Record<string, { logprob: number; rank: number; decoded_token: string }>;

/** Text of a token as vLLM reports it: `token_id:<id>` with `return_tokens_as_token_ids`, else the token's text. */
export function tokenLabel(context: ServeContext, tokenId: number, asTokenIds: boolean): string {
  return asTokenIds ? `token_id:${tokenId}` : context.served.model.tokenizer.tokenText(tokenId);
}

/** Parses and checks a completion request against the server's limits. */
export function checkCompletionRequest(context: ServeContext, body: unknown): CompletionRequest {
  const request = parseBody(completionRequestSchema, body);
  checkModelName(context, request.model);
  if ((request.n ?? 1) !== 1)
    throw new ServeRequestError(400, 'hat serve samples one sequence per prompt: n must be 1', 'n');
  const maxTokens = request.max_tokens ?? 16;
  if (maxTokens < 1 && request.echo !== true)
    throw new ServeRequestError(400, `max_tokens must be at least 1, got ${maxTokens}.`, 'max_tokens');
  const promptLogprobs =
    request.prompt_logprobs === -1 ? context.served.model.decoder.info.vocabularySize : request.prompt_logprobs;
  if ((promptLogprobs ?? 0) > context.maxLogprobs && request.prompt_logprobs !== -1) {
    throw new ServeRequestError(
      400,
      `Requested prompt logprobs of ${promptLogprobs}, which is greater than max allowed: ${context.maxLogprobs}`,
      'prompt_logprobs',
    );
  }
  if ((request.logprobs ?? 0) > context.maxLogprobs) {
    throw new ServeRequestError(
      400,
      `Requested sample logprobs of ${request.logprobs}, which is greater than max allowed: ${context.maxLogprobs}`,
      'logprobs',
    );
  }
  if (request.stream === true && request.prompt_logprobs !== null && request.prompt_logprobs !== undefined) {
    throw new ServeRequestError(400, 'prompt_logprobs is not compatible with streaming.', 'prompt_logprobs');
  }
  return request;
}

export function checkModelName(context: ServeContext, model: string | null | undefined): void {
  if (model !== null && model !== undefined && model !== context.served.modelId) {
    throw new ServeRequestError(404, `The model \`${model}\` does not exist.`, 'model');
  }
}

/** The prompts of a request as token ids (text is encoded with the model's tokenizer, no special tokens added). */
function promptIdsOf(context: ServeContext, prompt: CompletionRequest['prompt']): number[][] {
  const encode = (text: string): number[] => context.served.model.tokenizer.encode(text);
  if (typeof prompt === 'string') return [encode(prompt)];
  if (prompt.every((item) => typeof item === 'string')) return prompt.map(encode);
  if (prompt.every((item) => typeof item === 'number')) return [prompt];
  return prompt;
}

/**
 * `prompt_logprobs`: per prompt position, the raw logprob (temperature 1) and vocabulary rank
 * of the prompt's token plus the k most likely tokens; the first position is null.
 */
export async function promptLogprobsOf(
  context: ServeContext,
  promptIds: readonly number[],
  topK: number,
): Promise<Array<PromptLogprobEntry | null>> {
  const vocabularySize = context.served.model.decoder.info.vocabularySize;
  if (promptIds.length < 2) return [null];
  return context.scheduler.exclusive(async (decoder) => {
    const scored = await decoder.score(promptIds.slice(0, 1), promptIds.slice(1), {
      temperature: 1,
      topLogprobs: Math.max(1, topK),
    });
    const ownRanks = scored.tokens.map((token) => {
      const index = (token.top ?? []).findIndex((entry) => entry.tokenId === token.tokenId);
      return index >= 0 ? index + 1 : undefined;
    });
    // Ranks of tokens outside the top k need their whole row: one logits pass, only then.
    if (ownRanks.some((rank) => rank === undefined)) {
      const logits = await decoder.logits(promptIds);
      ownRanks.forEach((rank, index) => {
        if (rank !== undefined) return;
        const row = logits.subarray(index * vocabularySize, (index + 1) * vocabularySize);
        const own = row[promptIds[index + 1]];
        let count = 0;
        for (let column = 0; column < row.length; column++) if (row[column] >= own) count++;
        ownRanks[index] = count;
      });
    }
    const decode = (tokenId: number): string => context.served.model.tokenizer.tokenText(tokenId);
    return [
      null,
      ...scored.tokens.map((token, index) => {
        const entry: PromptLogprobEntry = {
          [String(token.tokenId)]: {
            logprob: Math.max(token.rawLogprob, minimumLogprob),
            rank: ownRanks[index] as number,
            decoded_token: decode(token.tokenId),
          },
        };
        (token.top ?? []).slice(0, topK).forEach((candidate, rank) => {
          entry[String(candidate.tokenId)] ??= {
            logprob: Math.max(candidate.logprob, minimumLogprob),
            rank: rank + 1,
            decoded_token: decode(candidate.tokenId),
          };
        });
        return entry;
      }),
    ];
  });
}

/** vLLM's `CompletionLogProbs` from a list of tokens (`null` logprob for the first echoed prompt token). */
export function completionLogprobs(
  context: ServeContext,
  tokens: Array<{ tokenId: number; logprob: number | null; top: ServedToken['top'] | null }>,
  topLogprobs: number,
  asTokenIds: boolean,
  initialOffset = 0,
): {
  text_offset: number[];
  token_logprobs: Array<number | null>;
  tokens: string[];
  top_logprobs: Array<Record<string, number> | null>;
} {
  const label = (tokenId: number): string => tokenLabel(context, tokenId, asTokenIds);
  let offset = initialOffset;
  const textOffset: number[] = [];
  for (const token of tokens) {
    textOffset.push(offset);
    offset += context.served.model.tokenizer.tokenText(token.tokenId).length;
  }
  return {
    text_offset: textOffset,
    token_logprobs: tokens.map((token) => (token.logprob === null ? null : Math.max(token.logprob, minimumLogprob))),
    tokens: tokens.map((token) => label(token.tokenId)),
    // vLLM: the sampled token first, then the alternatives, topLogprobs + 1 entries at most.
    top_logprobs: tokens.map((token) => {
      if (token.logprob === null || token.top === null) return null;
      const entries: Array<[number, number]> = [
        [token.tokenId, token.logprob],
        ...token.top
          .filter((entry) => entry.tokenId !== token.tokenId)
          .map((entry): [number, number] => [entry.tokenId, entry.logprob]),
      ];
      const out: Record<string, number> = {};
      for (const [tokenId, logprob] of entries.slice(0, topLogprobs + 1))
        out[label(tokenId)] ??= Math.max(logprob, minimumLogprob);
      return out;
    }),
  };
}

let completionCounter = 0;

/** `POST /v1/completions`. Returns the response body, or streams it through `sse` when `stream` is set. */
export async function handleCompletion(
  context: ServeContext,
  body: unknown,
  sse: () => SseWriter,
  signal: AbortSignal,
): Promise<unknown> {
  const request = checkCompletionRequest(context, body);
  const prompts = promptIdsOf(context, request.prompt);
  const id = `cmpl-${Date.now().toString(36)}${(completionCounter++).toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = context.served.modelId;
  const maxTokens = request.max_tokens ?? 16;
  const asTokenIds = request.return_tokens_as_token_ids === true;
  const echo = request.echo === true;
  const topLogprobs = request.logprobs ?? 0;
  const wantsLogprobs = request.logprobs !== null && request.logprobs !== undefined;
  const promptLogprobCount = request.prompt_logprobs === -1 ? context.maxLogprobs : request.prompt_logprobs;
  const settings = (
    promptIds: number[],
    onToken?: Parameters<typeof runGeneration>[1]['onToken'],
  ): Parameters<typeof runGeneration>[1] => ({
    promptIds,
    maxTokens,
    ...samplingSettingsOf(context, request),
    topLogprobs,
    onToken,
    signal,
  });

  if (request.stream === true) {
    const stream = sse();
    const lastChunks = new Map<number, Record<string, unknown>>();
    const includeUsage = request.stream_options?.include_usage === true;
    // vLLM: usage in every chunk only with continuous_usage_stats, else only in the final usage chunk.
    const continuousUsage = includeUsage && request.stream_options?.continuous_usage_stats === true;
    const returnTokenIds = request.return_token_ids === true;
    const generations = await Promise.all(
      prompts.map(async (promptIds, index) => {
        // Tokens whose text is not visible yet (half a character) ride with the next chunk.
        let pending: ServedToken[] = [];
        // text_offset continues across chunks, as vLLM counts it from the text already sent.
        let textOffset = 0;
        let completionTokens = 0;
        // vLLM sends prompt_token_ids with a choice's first chunk, null after.
        let promptIdsSent = false;
        // vLLM sets both on every chunk (null when return_token_ids is off) and writes chunks with
        // exclude_unset: fields it set are sent even when null, fields left at their default are not.
        const tokenFields = (tokens: ServedToken[]): Record<string, unknown> => {
          if (!returnTokenIds) return { prompt_token_ids: null, token_ids: null };
          const fields = {
            prompt_token_ids: promptIdsSent ? null : promptIds,
            token_ids: tokens.map((token) => token.tokenId),
          };
          promptIdsSent = true;
          return fields;
        };
        const usageField = (): Record<string, unknown> =>
          continuousUsage
            ? {
                usage: {
                  prompt_tokens: promptIds.length,
                  completion_tokens: completionTokens,
                  total_tokens: promptIds.length + completionTokens,
                },
              }
            : {};
        if (echo) {
          stream.send({
            id,
            created,
            model,
            choices: [
              {
                index,
                text: context.served.model.tokenizer.decode(promptIds),
                logprobs: null,
                finish_reason: null,
                stop_reason: null,
                ...tokenFields([]),
              },
            ],
            ...usageField(),
          });
        }
        const generation = await runGeneration(
          context,
          settings(promptIds, ({ delta, token, last }) => {
            pending.push(token);
            completionTokens++;
            if (delta === '' && !last) return;
            const logprobs = wantsLogprobs
              ? completionLogprobs(context, pending, topLogprobs, asTokenIds, textOffset)
              : null;
            for (const sent of pending) textOffset += context.served.model.tokenizer.tokenText(sent.tokenId).length;
            const fields = { text: delta, logprobs, ...tokenFields(pending) };
            pending = [];
            if (!last)
              stream.send({
                id,
                created,
                model,
                choices: [{ index, ...fields, finish_reason: null, stop_reason: null }],
                ...usageField(),
              });
            else lastChunks.set(index, fields);
          }),
        );
        const final = lastChunks.get(index) ?? { text: '', logprobs: null, ...tokenFields([]) };
        stream.send({
          id,
          created,
          model,
          choices: [
            {
              index,
              ...final,
              finish_reason: generation.finishReason,
              stop_reason: generation.stopReason,
            },
          ],
          ...usageField(),
        });
        return generation;
      }),
    );
    if (includeUsage) {
      // vLLM writes this chunk with exclude_none: a null prompt_tokens_details is left out.
      const { prompt_tokens_details: _, ...usage } = usageOf(generations);
      stream.send({ id, object: 'text_completion', created, model, choices: [], usage });
    }
    stream.done();
    return undefined;
  }
  const choices = await Promise.all(
    prompts.map(async (promptIds, index) => {
      const needsPromptScores = promptLogprobCount !== null && promptLogprobCount !== undefined;
      const echoScores = echo && wantsLogprobs;
      const promptScores =
        needsPromptScores || echoScores
          ? await promptLogprobsOf(context, promptIds, Math.max(promptLogprobCount ?? 0, echoScores ? topLogprobs : 0))
          : undefined;
      const generation: ServeGeneration | undefined =
        maxTokens > 0 ? await runGeneration(context, settings(promptIds)) : undefined;
      const promptText = echo ? context.served.model.tokenizer.decode(promptIds) : '';
      const echoed = echo
        ? promptIds.map((tokenId, position) => {
            const entry = promptScores?.[position];
            const own = entry?.[String(tokenId)];
            const top = entry
              ? Object.entries(entry)
                  .sort(([, a], [, b]) => a.rank - b.rank)
                  .map(([candidate, value]) => ({ tokenId: Number(candidate), logprob: value.logprob }))
              : null;
            return { tokenId, logprob: own?.logprob ?? null, top };
          })
        : [];
      const generated = generation?.tokens ?? [];
      return {
        index,
        text: promptText + (generation?.text ?? ''),
        logprobs: wantsLogprobs
          ? completionLogprobs(context, [...echoed, ...generated], topLogprobs, asTokenIds)
          : null,
        finish_reason: generation?.finishReason ?? 'length',
        stop_reason: generation?.stopReason ?? null,
        prompt_logprobs: needsPromptScores ? trimPromptLogprobs(promptScores!, promptIds, promptLogprobCount) : null,
        prompt_token_ids: request.return_token_ids === true ? promptIds : null,
        token_ids: request.return_token_ids === true ? (generation?.tokenIds ?? []) : null,
        generation,
      };
    }),
  );
  const generations = choices.map((choice) => choice.generation);
  return {
    id,
    object: 'text_completion',
    created,
    model,
    choices: choices.map(({ generation: _generation, ...choice }) => choice),
    service_tier: null,
    system_fingerprint: null,
    usage: usageOf(generations, prompts),
    kv_transfer_params: null,
  };
}

/** Keeps the prompt token plus the top k per position (scores may have been fetched with more for echo). */
function trimPromptLogprobs(
  entries: Array<PromptLogprobEntry | null>,
  promptIds: readonly number[],
  topK: number,
): Array<PromptLogprobEntry | null> {
  return entries.map((entry, position) => {
    if (!entry) return null;
    const own = String(promptIds[position]);
    return Object.fromEntries(
      Object.entries(entry).filter(([tokenId, value]) => tokenId === own || value.rank <= topK),
    );
  });
}

/** vLLM's UsageInfo over all choices. */
export function usageOf(
  generations: Array<ServeGeneration | undefined>,
  prompts?: number[][],
): { prompt_tokens: number; total_tokens: number; completion_tokens: number; prompt_tokens_details: null } {
  const promptTokens = prompts
    ? prompts.reduce((sum, prompt) => sum + prompt.length, 0)
    : generations.reduce((sum, generation) => sum + (generation?.promptIds.length ?? 0), 0);
  const completionTokens = generations.reduce((sum, generation) => sum + (generation?.tokenIds.length ?? 0), 0);
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: null,
  };
}
