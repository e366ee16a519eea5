import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { startServeServer, type ServeServer } from '../shared/models/serve';

/**
 * `hat serve` over a real (tiny, random-weight) ONNX model: what comes over vLLM's HTTP API must
 * be what the in-process path computes for the same model, prompt and seed.
 */
describe('hat serve (vLLM-compatible server over an ONNX model)', () => {
  let cacheDir: string;
  let server: ServeServer;
  let inProcess: OnnxModelClient;

  beforeAll(async () => {
    cacheDir = mkdtempSync(join(tmpdir(), 'hat-serve-'));
    server = await startServeServer({ model: 'dummy:bytes?layers=2&hidden=32&heads=4&kvHeads=2&seed=serve-test', cacheDir });
    inProcess = new OnnxModelClient({ modelDir: server.modelDir });
  });

  afterAll(async () => {
    await server?.close();
    await inProcess?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, body: await response.json() };
  };

  it('labels dummy weights, the context length and the logprobs mode in /v1/models', async () => {
    const body = (await (await fetch(`${server.baseUrl}/models`)).json()) as any;
    expect(body.object).toBe('list');
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({ id: server.modelId, object: 'model', max_model_len: 32768, hat_dummy_weights: true, logprobs_mode: 'raw_logprobs' });
  });

  it('samples the same token ids and logprobs as the in-process decoder for the same prompt and seed', async () => {
    const promptIds = await inProcess.promptIds([{ role: 'user', content: 'Say something.' }]);
    const sampling = { temperature: 0.8, topP: 0.95, topK: 40 };
    const expected = await inProcess.generate(promptIds, { maxNewTokens: 12, ...sampling, seed: 1234, logprobs: true, topLogprobs: 3 });
    const { status, body } = await post('/v1/completions', {
      model: server.modelId,
      prompt: promptIds,
      max_tokens: 12,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: sampling.topK,
      seed: 1234,
      logprobs: 3,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
    });
    expect(status).toBe(200);
    const choice = body.choices[0];
    const sampledIds = choice.logprobs.tokens.map((token: string) => Number(token.replace('token_id:', '')));
    expect(sampledIds).toEqual(expected.tokenIds);
    expect(choice.token_ids).toEqual(expected.tokenIds);
    expect(choice.prompt_token_ids).toEqual(promptIds);
    // raw_logprobs: temperature 1 over the whole vocabulary, whatever the sampling temperature.
    choice.logprobs.token_logprobs.forEach((logprob: number, index: number) => expect(logprob).toBeCloseTo(expected.tokens![index]!.rawLogprob, 4));
    // top_logprobs: the sampled token, then the 3 most likely (raw), keyed token_id:<id>.
    const firstTop = choice.logprobs.top_logprobs[0] as Record<string, number>;
    for (const alternative of expected.tokens![0]!.top!) expect(Object.keys(firstTop)).toContain(`token_id:${alternative.tokenId}`);
    expect(body.usage).toMatchObject({ prompt_tokens: promptIds.length, completion_tokens: expected.tokenIds.length });
    expect(choice.finish_reason).toBe(expected.finishReason);
  });

  it('gives the same sample for the same seed and a different one for another seed', async () => {
    const request = { prompt: [1, 2, 3, 4, 5], max_tokens: 16, temperature: 1, seed: 5, return_token_ids: true };
    const first = await post('/v1/completions', request);
    const again = await post('/v1/completions', request);
    const other = await post('/v1/completions', { ...request, seed: 6 });
    expect(again.body.choices[0].token_ids).toEqual(first.body.choices[0].token_ids);
    expect(other.body.choices[0].token_ids).not.toEqual(first.body.choices[0].token_ids);
  });

  it('answers prompt_logprobs per position as vLLM does, matching in-process scoring', async () => {
    const promptIds = [72, 101, 108, 108, 111, 33];
    const { body } = await post('/v1/completions', { prompt: promptIds, max_tokens: 1, prompt_logprobs: 2 });
    const entries = body.choices[0].prompt_logprobs;
    expect(entries).toHaveLength(promptIds.length);
    expect(entries[0]).toBeNull();
    const scored = await inProcess.score(promptIds.slice(0, 1), promptIds.slice(1), { temperature: 1 });
    promptIds.slice(1).forEach((tokenId, offset) => {
      const own = entries[offset + 1][String(tokenId)];
      expect(own.logprob).toBeCloseTo(scored.tokens[offset]!.logprob, 4);
      expect(own.rank).toBeGreaterThanOrEqual(1);
      expect(Object.keys(entries[offset + 1]).length).toBeGreaterThanOrEqual(2);
    });
  });

  it('refuses what vLLM refuses, in its error shape', async () => {
    const tooMany = await post('/v1/completions', { prompt: [1, 2], max_tokens: 1, logprobs: 21 });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toMatchObject({ type: 'BadRequestError', code: 400 });
    expect(tooMany.body.error.message).toContain('greater than max allowed: 20');
    const wrongModel = await post('/v1/completions', { model: 'other', prompt: [1], max_tokens: 1 });
    expect(wrongModel.status).toBe(404);
    const outOfVocabulary = await post('/v1/completions', { prompt: [1, 999999], max_tokens: 1 });
    expect(outOfVocabulary.status).toBe(400);
    expect(outOfVocabulary.body.error.message).toContain('999999');
  });
});
