import { loadChatTokenizer } from '../../text/load-chat-tokenizer';
import type { OnnxModelClient } from '../onnx/onnx-model-client';
import type { OnnxTokenScorer } from '../scoring/onnx-token-scorer';
import type { ChatResponder, RecordedRequest } from './openai-test-server';
import type { ScriptedChatResponse, ScriptedContentToken } from './chat-chunk-script';
import type { PromptPositionScore, PromptScorer, PromptScores } from './prompt-scoring-handlers';

/**
 * A real model behind the test server: the scoring endpoints (vLLM `prompt_logprobs`, SGLang
 * `input_token_logprobs`) answer with an ONNX decoder's own logprobs (OnnxDecoder.scoreBatch),
 * and the chat endpoint with the ONNX client's generations, so what comes over HTTP can be
 * checked against the in-process numbers of the same model.
 */

/**
 * A PromptScorer over an ONNX model. Each call is one scoring pass (positions 1..n and the
 * distribution after the last token) plus one logits pass for vLLM's ranks, which holds
 * tokens × vocabulary floats: meant for test-sized models.
 */
export async function createOnnxPromptScorer(scorer: OnnxTokenScorer, modelDir: string): Promise<PromptScorer> {
  const tokenizer = await loadChatTokenizer({ modelDir });
  const vocabularySize = (await scorer.load()).info.vocabularySize;
  return {
    decode: (tokenId) => tokenizer.decode([tokenId]),
    async score(tokenIds, options): Promise<PromptScores> {
      const topK = Math.max(1, options.topK);
      // The placeholder after the last token makes one pass also yield the next-token distribution.
      const [scored, logits] = await scorer.exclusive(
        async (decoder) =>
          [
            await decoder.score(tokenIds.slice(0, 1), [...tokenIds.slice(1), 0], {
              temperature: options.temperature,
              topLogprobs: topK,
            }),
            await decoder.logits(tokenIds),
          ] as const,
      );
      const positions: Array<PromptPositionScore | null> = [null];
      for (let position = 1; position < tokenIds.length; position++) {
        const token = scored.tokens[position - 1];
        const row = logits.subarray((position - 1) * vocabularySize, position * vocabularySize);
        positions.push({
          logprob: token.logprob,
          rank: rankOf(row, tokenIds[position]),
          top: (token.top ?? [])
            .slice(0, options.topK)
            .map((candidate) => ({ tokenId: candidate.tokenId, logprob: candidate.logprob })),
        });
      }
      const next = scored.tokens[tokenIds.length - 1]?.top?.slice(0, topK) ?? [];
      return { positions, next: next.map((candidate) => ({ tokenId: candidate.tokenId, logprob: candidate.logprob })) };
    },
  };
}

/** vLLM's rank: how many vocabulary entries score at least as high as the token (1 = the best). */
function rankOf(row: Float32Array, tokenId: number): number {
  const own = row[tokenId];
  let rank = 0;
  for (let index = 0; index < row.length; index++) if (row[index] >= own) rank++;
  return rank;
}

/**
 * A chat responder that answers with the ONNX client's generation: one streamed chunk per
 * generated token with its logprob (and top alternatives when asked), spelled `token_id:<id>`
 * when the request sets vLLM's `return_tokens_as_token_ids`.
 */
export function onnxChatResponder(client: OnnxModelClient): ChatResponder {
  return async (request: RecordedRequest): Promise<ScriptedChatResponse> => {
    const body = (request.body ?? {}) as Record<string, any>;
    const topLogprobs = Number.isInteger(body.top_logprobs) ? (body.top_logprobs as number) : 0;
    const response = await client.chat({
      messages: body.messages,
      tools: body.tools,
      maxTokens: body.max_tokens,
      temperature: body.temperature,
      topP: body.top_p,
      topK: body.top_k,
      seed: body.seed,
      stop: body.stop,
      logprobs: true,
      topLogprobs,
    });
    const model = await client.load();
    const asIds = body.return_tokens_as_token_ids === true;
    const spell = (tokenId: number | undefined, text: string): string =>
      asIds && tokenId !== undefined ? `token_id:${tokenId}` : text;
    const tokens = response.logprobs ?? [];
    const ids = tokens.map((token) => token.tokenId as number);
    const eos = new Set(model.decoder.info.eosTokenIds);
    // Each token adds what the decoded text grew by; a half character waits for the rest.
    let shown = '';
    const contentTokens = tokens.map((token, index): ScriptedContentToken => {
      const upTo = ids.slice(0, index + 1).filter((tokenId) => !eos.has(tokenId));
      const decoded = model.tokenizer.decode(upTo);
      const last = index === tokens.length - 1;
      const visible = decoded.endsWith('\uFFFD') && !last ? shown : decoded;
      const text = visible.startsWith(shown) ? visible.slice(shown.length) : '';
      shown = visible;
      return {
        text,
        token: spell(token.tokenId, token.token),
        logprob: token.logprob,
        ...(token.top
          ? {
              top: token.top.map((alternative) => ({
                token: spell(alternative.tokenId, alternative.token),
                logprob: alternative.logprob,
              })),
            }
          : {}),
      };
    });
    return {
      contentTokens,
      finishReason: response.finishReason,
      promptTokens: response.usage.promptTokens,
      model: client.modelId,
    };
  };
}
