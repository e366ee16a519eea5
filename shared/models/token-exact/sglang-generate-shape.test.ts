import { OpenAiTestServer, type PromptScorer } from '../testing/openai-test-server';
import { sglangSampledTokens, sglangSamplingRequest } from './served-token-sampler';

/**
 * SGLang `/generate` shapes as SGLang's server has them (docs/token-exact.md,
 * what was checked against SGLang's source): request fields, `[logprob, token_id, text]` triples,
 * `finish_reason` objects, `sampling_params` refusals, greedy logprobs at temperature 1.
 */

const url = 'http://sglang.test/generate';

/** Greedy next token is (last + 1) % 5; a second candidate one logit below it. */
const cyclingScorer: PromptScorer = {
  score(tokenIds, { topK, temperature }) {
    const last = tokenIds[tokenIds.length - 1] ?? 0;
    const best = (last + 1) % 5;
    // Two candidates with logits 0 and -1: p(best) at temperature T is 1 / (1 + e^(-1/T)).
    const other = Math.log1p(Math.exp(-1 / temperature));
    const next = [
      { tokenId: best, logprob: -other },
      { tokenId: (best + 1) % 5, logprob: -1 / temperature - other },
    ].slice(0, Math.max(1, topK));
    return { positions: tokenIds.map(() => null), next };
  },
};

describe('SGLang /generate shapes', () => {
  let server: OpenAiTestServer;
  beforeAll(async () => {
    server = await OpenAiTestServer.start({ scorer: cyclingScorer });
  });
  afterAll(async () => server.close());

  async function post(body: Record<string, unknown>): Promise<{ status: number; body: unknown }> {
    const response = await fetch(`${server.baseUrl.replace(/\/v1$/, '')}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  it('greedy (temperature 0) reports logprobs at temperature 1, as SGLang runs greedy as top_k 1 at temperature 1', async () => {
    const request = sglangSamplingRequest({
      promptIds: [1, 2],
      sampling: { temperature: 0, topP: 1, topK: 0 },
      maxTokens: 2,
      seed: 3,
      stopTokenIds: [],
    });
    expect(request).toMatchObject({
      input_ids: [1, 2],
      return_logprob: true,
      logprob_start_len: -1,
      top_logprobs_num: 0,
      sampling_params: { top_k: -1, sampling_seed: 3, max_new_tokens: 2 },
    });
    const answer = await post(request);
    expect(answer.status).toBe(200);
    const sampled = sglangSampledTokens(answer.body, url);
    expect(sampled.tokenIds).toEqual([3, 4]);
    sampled.logprobs.forEach((logprob) => expect(logprob).toBeCloseTo(-Math.log1p(Math.exp(-1)), 10));
    expect(sampled.finishReason).toBe('length');
    expect((answer.body as { meta_info: Record<string, unknown> }).meta_info).toMatchObject({
      prompt_tokens: 2,
      completion_tokens: 2,
      finish_reason: { type: 'length', length: 2 },
    });
  });

  it('sampled requests report logprobs at the sampling temperature', async () => {
    const answer = await post(
      sglangSamplingRequest({
        promptIds: [4],
        sampling: { temperature: 0.5, topP: 1, topK: 0 },
        maxTokens: 1,
        seed: 1,
        stopTokenIds: [0],
      }),
    );
    const sampled = sglangSampledTokens(answer.body, url);
    expect(sampled.tokenIds).toEqual([0]);
    expect(sampled.logprobs[0]).toBeCloseTo(-Math.log1p(Math.exp(-2)), 10);
    expect(sampled.finishReason).toBe('stop');
    expect((answer.body as { meta_info: Record<string, unknown> }).meta_info.finish_reason).toEqual({
      type: 'stop',
      matched: 0,
    });
  });

  it('refuses sampling_params SGLang refuses (top_k 0, top_p 0, negative temperature)', async () => {
    for (const sampling_params of [{ top_k: 0 }, { top_p: 0 }, { temperature: -1 }]) {
      const answer = await post({ input_ids: [1], sampling_params, return_logprob: true });
      expect(answer.status).toBe(400);
    }
  });

  it("return_text_in_logprobs fills the triple's text, null otherwise", async () => {
    const withText = await post({
      input_ids: [1],
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      return_logprob: true,
      return_text_in_logprobs: true,
    });
    const without = await post({
      input_ids: [1],
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      return_logprob: true,
    });
    expect(
      (withText.body as { meta_info: { output_token_logprobs: unknown[][] } }).meta_info.output_token_logprobs[0]![2],
    ).toEqual(expect.any(String));
    expect(
      (without.body as { meta_info: { output_token_logprobs: unknown[][] } }).meta_info.output_token_logprobs[0]![2],
    ).toBeNull();
  });

  it('refuses an aborted or unfinished generation and ids that disagree, naming the field', () => {
    const triples = [[-0.5, 3, null]];
    const meta = { output_token_logprobs: triples, prompt_tokens: 1, completion_tokens: 1 };
    expect(() =>
      sglangSampledTokens(
        {
          meta_info: {
            ...meta,
            finish_reason: { type: 'abort', message: 'out of memory', status_code: 500, err_type: null },
          },
        },
        url,
      ),
    ).toThrow(/aborted the generation \(out of memory\)/);
    expect(() => sglangSampledTokens({ meta_info: { ...meta, finish_reason: null } }, url)).toThrow(
      /finish_reason is null/,
    );
    expect(() =>
      sglangSampledTokens(
        { output_ids: [4], meta_info: { ...meta, finish_reason: { type: 'length', length: 1 } } },
        url,
      ),
    ).toThrow(/output_ids differ/);
    expect(() =>
      sglangSampledTokens(
        { meta_info: { ...meta, completion_tokens: 2, finish_reason: { type: 'length', length: 1 } } },
        url,
      ),
    ).toThrow(/completion_tokens is 2/);
    expect(
      sglangSampledTokens(
        { output_ids: [3], meta_info: { ...meta, finish_reason: { type: 'stop', matched: '</s>' } } },
        url,
      ),
    ).toMatchObject({ tokenIds: [3], logprobs: [-0.5], finishReason: 'stop' });
  });
});
