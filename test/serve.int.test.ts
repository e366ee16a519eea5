import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { createModelClient } from '../shared/models/model-registry';
import { startServeServer, type ServeServer } from '../serve';

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
    server = await startServeServer({
      model: 'dummy:bytes?layers=2&hidden=32&heads=4&kvHeads=2&seed=serve-test',
      cacheDir,
    });
    inProcess = new OnnxModelClient({ modelDir: server.modelDir });
  });

  afterAll(async () => {
    await server?.close();
    await inProcess?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  };

  it('labels dummy weights, the context length and the logprobs mode in /v1/models', async () => {
    const body = (await (await fetch(`${server.baseUrl}/models`)).json()) as any;
    expect(body.object).toBe('list');
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({
      id: server.modelId,
      object: 'model',
      max_model_len: 32768,
      hat_dummy_weights: true,
      logprobs_mode: 'raw_logprobs',
    });
  });

  it('samples the same token ids and logprobs as the in-process decoder for the same prompt and seed', async () => {
    const promptIds = await inProcess.promptIds([{ role: 'user', content: 'Say something.' }]);
    const sampling = { temperature: 0.8, topP: 0.95, topK: 40 };
    const expected = await inProcess.generate(promptIds, {
      maxNewTokens: 12,
      ...sampling,
      seed: 1234,
      logprobs: true,
      topLogprobs: 3,
    });
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
    choice.logprobs.token_logprobs.forEach((logprob: number, index: number) =>
      expect(logprob).toBeCloseTo(expected.tokens![index].rawLogprob, 4),
    );
    // top_logprobs: the sampled token, then the 3 most likely (raw), keyed token_id:<id>.
    const firstTop = choice.logprobs.top_logprobs[0] as Record<string, number>;
    for (const alternative of expected.tokens![0].top!)
      expect(Object.keys(firstTop)).toContain(`token_id:${alternative.tokenId}`);
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
      expect(own.logprob).toBeCloseTo(scored.tokens[offset].logprob, 4);
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
    // Sampling features it does not implement are refused, not ignored (defaults pass).
    const penalty = await post('/v1/completions', { prompt: [1], max_tokens: 1, repetition_penalty: 1.2 });
    expect(penalty.status).toBe(400);
    expect(penalty.body.error).toMatchObject({
      param: 'repetition_penalty',
      message: expect.stringContaining('does not implement repetition_penalty'),
    });
    expect(
      (await post('/v1/completions', { prompt: [1], max_tokens: 1, repetition_penalty: 1, presence_penalty: 0 }))
        .status,
    ).toBe(200);
    expect(
      (
        await post('/v1/chat/completions', {
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 1,
          response_format: { type: 'json_object' },
        })
      ).status,
    ).toBe(400);
    const outOfVocabulary = await post('/v1/completions', { prompt: [1, 999999], max_tokens: 1 });
    expect(outOfVocabulary.status).toBe(400);
    expect(outOfVocabulary.body.error.message).toContain('999999');
  });
  it('renders chat with the model template (tools included) exactly as the in-process path and /tokenize do', async () => {
    const messages = [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: 'Weather in Paris?' },
    ];
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'get_weather',
          description: 'Weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } } },
        },
      },
    ];
    const expectedIds = await inProcess.promptIds(messages, tools);
    const tokenized = await post('/tokenize', { messages, tools });
    expect(tokenized.body).toMatchObject({ count: expectedIds.length, max_model_len: 32768, tokens: expectedIds });
    const chat = await post('/v1/chat/completions', {
      messages,
      tools,
      max_tokens: 6,
      temperature: 0.7,
      seed: 3,
      logprobs: true,
      top_logprobs: 2,
      return_token_ids: true,
    });
    expect(chat.status).toBe(200);
    expect(chat.body.object).toBe('chat.completion');
    expect(chat.body.prompt_token_ids).toEqual(expectedIds);
    expect(chat.body.usage.prompt_tokens).toBe(expectedIds.length);
    const choice = chat.body.choices[0];
    const expected = await inProcess.generate(expectedIds, {
      maxNewTokens: 6,
      temperature: 0.7,
      seed: 3,
      logprobs: true,
    });
    expect(choice.token_ids).toEqual(expected.tokenIds);
    expect(choice.logprobs.content).toHaveLength(expected.tokenIds.length);
    choice.logprobs.content.forEach((entry: any, index: number) => {
      expect(entry.logprob).toBeCloseTo(expected.tokens![index].rawLogprob, 4);
      expect(entry.top_logprobs).toHaveLength(2);
      expect(Buffer.from(entry.bytes).toString('utf8')).toBe(entry.token);
    });
    const detokenized = await post('/detokenize', { tokens: expectedIds });
    expect(detokenized.body.prompt).toContain('Weather in Paris?');
  });

  it('renders a tool schema float as Python does (`"minimum": 1.0` stays 1.0), as vLLM reads the request', async () => {
    // Written by hand: JSON.stringify would write 1.0 as 1.
    const body =
      '{"messages": [{"role": "user", "content": "How many?"}], "tools": [{"type": "function", "function": ' +
      '{"name": "count", "parameters": {"type": "object", "properties": {"n": {"type": "number", "minimum": 1.0, "maximum": 1e16}}}}}]}';
    const response = await fetch(`${server.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(response.status).toBe(200);
    const { tokens } = (await response.json()) as { tokens: number[] };
    const prompt = (await post('/detokenize', { tokens })).body.prompt as string;
    expect(prompt).toContain('"minimum": 1.0, "maximum": 1e+16');
  });

  it('streams chat as SSE chunks whose content adds up to the non-streamed answer, then usage and [DONE]', async () => {
    const request = {
      messages: [{ role: 'user', content: 'Stream please.' }],
      max_tokens: 10,
      temperature: 1,
      seed: 11,
      logprobs: true,
    };
    const whole = await post('/v1/chat/completions', request);
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const events = (await response.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: '))
      .map((event) => event.slice('data: '.length));
    expect(events[events.length - 1]).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const content = chunks.flatMap((chunk) => chunk.choices.map((choice: any) => choice.delta.content ?? '')).join('');
    expect(content).toBe(whole.body.choices[0].message.content);
    const streamedLogprobs = chunks.flatMap((chunk) =>
      chunk.choices.flatMap((choice: any) => choice.logprobs?.content ?? []),
    );
    // Within float tolerance: two runs of the same request need not round identically (onnxruntime reductions).
    expect(streamedLogprobs.map((entry: any) => entry.logprob)).toEqual(
      whole.body.choices[0].logprobs.content.map((entry: any) => expect.closeTo(entry.logprob, 4)),
    );
    const finish = chunks.find((chunk) => chunk.choices[0]?.finish_reason);
    expect(finish.choices[0].finish_reason).toBe(whole.body.choices[0].finish_reason);
    const usage = chunks[chunks.length - 1];
    expect(usage.choices).toEqual([]);
    // Written with exclude_none as vLLM writes it: no null prompt_tokens_details.
    const { prompt_tokens_details: _, ...counts } = whole.body.usage;
    expect(usage.usage).toEqual(counts);
  });

  it('batches concurrent requests without changing any sample, and counts them in /metrics under vLLM names', async () => {
    const prompts = [[10, 20, 30], [40, 50, 60, 70, 80], [90], [100, 110]];
    const request = (prompt: number[], seed: number) => ({
      prompt,
      max_tokens: 8,
      temperature: 0.9,
      seed,
      logprobs: 0,
      return_token_ids: true,
    });
    const alone: any[] = [];
    for (const [index, prompt] of prompts.entries())
      alone.push((await post('/v1/completions', request(prompt, index))).body.choices[0]);
    const before = await metricsText();
    const together = (
      await Promise.all(prompts.map((prompt, index) => post('/v1/completions', request(prompt, index))))
    ).map((reply) => reply.body.choices[0]);
    together.forEach((choice, index) => {
      expect(choice.token_ids).toEqual(alone[index].token_ids);
      choice.logprobs.token_logprobs.forEach((logprob: number, position: number) =>
        expect(logprob).toBeCloseTo(alone[index].logprobs.token_logprobs[position], 4),
      );
    });
    const after = await metricsText();
    const promptTokens = prompts.reduce((sum, prompt) => sum + prompt.length, 0);
    expect(counter(after, 'vllm:prompt_tokens_total') - counter(before, 'vllm:prompt_tokens_total')).toBe(promptTokens);
    expect(counter(after, 'vllm:generation_tokens_total') - counter(before, 'vllm:generation_tokens_total')).toBe(
      together.reduce((sum, choice) => sum + choice.token_ids.length, 0),
    );
    expect(
      counter(after, 'vllm:e2e_request_latency_seconds_count') -
        counter(before, 'vllm:e2e_request_latency_seconds_count'),
    ).toBe(prompts.length);
    expect(after).toMatch(/^vllm:num_requests_running\{model_name="[^"]+",engine="0"\} 0$/m);
    expect(after).toMatch(/^vllm:num_requests_waiting\{model_name="[^"]+",engine="0"\} 0$/m);
    expect(after).toContain('vllm:time_to_first_token_seconds_bucket');
  });

  it('ends at a stop string as vLLM does: text cut before it, finish_reason stop, stop_reason the string', async () => {
    const request = {
      prompt: 'Once upon a time',
      max_tokens: 24,
      temperature: 1,
      seed: 21,
      return_token_ids: true,
      ignore_eos: true,
    };
    const free = (await post('/v1/completions', request)).body.choices[0];
    // A stop string taken from the middle of the unstopped text (random weights: whatever it wrote).
    const characters = [...(free.text as string)];
    const stop = characters.slice(Math.floor(characters.length / 2), Math.floor(characters.length / 2) + 1).join('');
    const stopped = (await post('/v1/completions', { ...request, stop: [stop] })).body.choices[0];
    expect(stopped.finish_reason).toBe('stop');
    expect(stopped.stop_reason).toBe(stop);
    expect(stopped.text).toBe(free.text.slice(0, free.text.indexOf(stop)));
    expect(free.token_ids.slice(0, stopped.token_ids.length)).toEqual(stopped.token_ids);
    expect(stopped.token_ids.length).toBeLessThan(free.token_ids.length);
    const kept = (await post('/v1/completions', { ...request, stop: [stop], include_stop_str_in_output: true })).body
      .choices[0];
    expect(kept.text).toBe(`${stopped.text}${stop}`);
  });

  it('echoes a text prompt without generating (max_tokens 0), its logprobs those of prompt_logprobs', async () => {
    const { status, body } = await post('/v1/completions', {
      prompt: 'Hello there',
      max_tokens: 0,
      echo: true,
      logprobs: 1,
      prompt_logprobs: 1,
    });
    expect(status).toBe(200);
    const choice = body.choices[0];
    expect(choice.text).toBe('Hello there');
    expect(body.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 0 });
    expect(choice.logprobs.token_logprobs[0]).toBeNull();
    const promptIds = [...Buffer.from('Hello there', 'utf8')];
    choice.logprobs.token_logprobs.slice(1).forEach((logprob: number, index: number) => {
      expect(logprob).toBe(choice.prompt_logprobs[index + 1][String(promptIds[index + 1])].logprob);
    });
    expect(choice.logprobs.tokens.join('')).toBe('Hello there');
  });

  it('streams completions: text and per-token logprobs add up to the non-streamed answer', async () => {
    const request = {
      prompt: [
        [3, 4, 5],
        [6, 7],
      ],
      max_tokens: 9,
      temperature: 1,
      seed: 8,
      logprobs: 1,
      return_tokens_as_token_ids: true,
    };
    const whole = (await post('/v1/completions', request)).body;
    const response = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    });
    const events = (await response.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: '))
      .map((event) => event.slice('data: '.length));
    expect(events[events.length - 1]).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event));
    for (const index of [0, 1]) {
      const mine = chunks.flatMap((chunk) => chunk.choices.filter((choice: any) => choice.index === index));
      expect(mine.map((choice: any) => choice.text).join('')).toBe(whole.choices[index].text);
      expect(mine.flatMap((choice: any) => choice.logprobs?.tokens ?? [])).toEqual(
        whole.choices[index].logprobs.tokens,
      );
      expect(mine.flatMap((choice: any) => choice.logprobs?.token_logprobs ?? [])).toEqual(
        whole.choices[index].logprobs.token_logprobs.map((logprob: number) => expect.closeTo(logprob, 4)),
      );
      expect(mine[mine.length - 1].finish_reason).toBe(whole.choices[index].finish_reason);
    }
    // The final usage chunk leaves a null prompt_tokens_details out (vLLM writes it with exclude_none).
    const { prompt_tokens_details: _, ...usage } = whole.usage;
    expect(chunks[chunks.length - 1]).toEqual(expect.objectContaining({ choices: [], usage }));
    const refused = await post('/v1/completions', { ...request, stream: true, prompt_logprobs: 1 });
    expect(refused.status).toBe(400);
  });

  it('streams completions with return_token_ids as vLLM: token ids per chunk, prompt ids first, text_offset running on, usage only at the end', async () => {
    const request = { prompt: [3, 4, 5], max_tokens: 9, temperature: 1, seed: 8, logprobs: 0, return_token_ids: true };
    const whole = (await post('/v1/completions', request)).body;
    const response = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
    });
    const chunks = (await response.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: ') && event !== 'data: [DONE]')
      .map((event) => JSON.parse(event.slice('data: '.length)));
    const choices = chunks.flatMap((chunk) => chunk.choices);
    expect(choices.length).toBeGreaterThan(1);
    expect(choices.flatMap((choice: any) => choice.token_ids)).toEqual(whole.choices[0].token_ids);
    expect(choices.map((choice: any) => choice.prompt_token_ids)).toEqual([
      [3, 4, 5],
      ...choices.slice(1).map(() => null),
    ]);
    expect(choices.flatMap((choice: any) => choice.logprobs.text_offset)).toEqual(
      whole.choices[0].logprobs.text_offset,
    );
    expect(chunks.slice(0, -1).every((chunk) => !('usage' in chunk))).toBe(true);
    // The final usage chunk leaves a null prompt_tokens_details out (vLLM writes it with exclude_none).
    const { prompt_tokens_details: _, ...usage } = whole.usage;
    expect(chunks[chunks.length - 1]).toEqual(expect.objectContaining({ choices: [], usage }));
    const continuous = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        ...request,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    });
    const withUsage = (await continuous.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: ') && event !== 'data: [DONE]')
      .map((event) => JSON.parse(event.slice('data: '.length)));
    expect(withUsage.every((chunk) => chunk.usage?.prompt_tokens === 3)).toBe(true);
  });

  it('refuses a body that is not declared JSON with 400 in the OpenAI error shape and a wrong method on a known route with 405, as vLLM does', async () => {
    for (const path of ['/completions', '/chat/completions']) {
      const plain = await fetch(`${server.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: JSON.stringify({ prompt: [1], max_tokens: 1 }),
      });
      expect(plain.status).toBe(400);
      expect(await plain.json()).toEqual({
        error: {
          message: "Unsupported Media Type: Only 'application/json' is allowed",
          type: 'Bad Request',
          param: null,
          code: 400,
        },
      });
    }
    const charset = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ prompt: [1], max_tokens: 1 }),
    });
    expect(charset.status).toBe(200);
    const get = await fetch(`${server.baseUrl}/completions`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect((await fetch(`${server.baseUrl}/models`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${server.baseUrl}/nothing`)).status).toBe(404);
  });

  it("serves the project's own OpenAI client (streaming chat) with the in-process chat's answer for the same seed", async () => {
    const client = createModelClient({ adapter: 'openai', baseUrl: server.baseUrl, model: server.modelId });
    try {
      const request = {
        messages: [{ role: 'user' as const, content: 'Hello?' }],
        maxTokens: 10,
        temperature: 1,
        seed: 77,
        logprobs: true,
      };
      const served = await client.chat(request);
      const local = await inProcess.chat(request);
      expect(served.message.content).toBe(local.message.content);
      expect(served.finishReason).toBe(local.finishReason);
      expect(served.usage).toMatchObject({
        promptTokens: local.usage.promptTokens,
        completionTokens: local.usage.completionTokens,
      });
      expect(served.logprobs!.map((token) => token.logprob)).toEqual(
        local.logprobs!.map((token) => expect.closeTo(token.logprob, 4)),
      );
    } finally {
      await client.close?.();
    }
  });

  it('passes chat_template_kwargs to the template (Qwen3 enable_thinking), in chat and /tokenize', async () => {
    const messages = [{ role: 'user', content: 'Quick answer.' }];
    const plain = (await post('/tokenize', { messages })).body.tokens as number[];
    const noThinking = (await post('/tokenize', { messages, chat_template_kwargs: { enable_thinking: false } })).body
      .tokens as number[];
    const decode = async (tokens: number[]): Promise<string> => (await post('/detokenize', { tokens })).body.prompt;
    expect(noThinking.slice(0, plain.length)).toEqual(plain);
    expect(await decode(noThinking.slice(plain.length))).toBe('<think>\n\n</think>\n\n');
    const chat = await post('/v1/chat/completions', {
      messages,
      chat_template_kwargs: { enable_thinking: false },
      max_tokens: 2,
      return_token_ids: true,
    });
    expect(chat.body.prompt_token_ids).toEqual(noThinking);
  });

  it('with tools, streamed and non-streamed chat agree on content, tool calls and malformed calls', async () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
      },
    ];
    for (const seed of [1, 2, 3]) {
      const request = {
        messages: [{ role: 'user', content: 'Use a tool.' }],
        tools,
        max_tokens: 40,
        temperature: 1,
        seed,
      };
      const whole = (await post('/v1/chat/completions', request)).body.choices[0];
      const response = await fetch(`${server.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...request, stream: true }),
      });
      const chunks = (await response.text())
        .split('\n\n')
        .filter((event) => event.startsWith('data: {'))
        .map((event) => JSON.parse(event.slice('data: '.length)));
      const deltas = chunks.flatMap((chunk) => chunk.choices.map((choice: any) => choice.delta));
      expect(deltas.map((delta) => delta.content ?? '').join('')).toBe(whole.message.content ?? '');
      // As a client assembles them: name and id once per index, arguments appended.
      const assembled: Array<{ name: string; arguments: string }> = [];
      for (const call of deltas.flatMap((delta) => delta.tool_calls ?? [])) {
        assembled[call.index] ??= { name: '', arguments: '' };
        if (call.function.name !== undefined) assembled[call.index].name = call.function.name;
        assembled[call.index].arguments += call.function.arguments ?? '';
      }
      expect(assembled).toEqual((whole.message.tool_calls ?? []).map((call: any) => call.function));
      expect(deltas.find((delta) => delta.hat_malformed_tool_calls)?.hat_malformed_tool_calls).toEqual(
        whole.message.hat_malformed_tool_calls,
      );
      // Text that opens a call without completing it is listed, never dropped.
      if ((whole.message.content ?? '').includes('<tool_call>'))
        expect(whole.message.hat_malformed_tool_calls.length).toBeGreaterThan(0);
    }
  });

  it('answers /health and /version', async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    expect(((await (await fetch(`${server.url}/version`)).json()) as any).version).toMatch(/^hat-serve /);
  });

  const metricsText = async (): Promise<string> => (await fetch(`${server.url}/metrics`)).text();
});

/** Sum of a metric's samples (all label sets). */
function counter(text: string, name: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

describe('hat serve --logprobs-mode processed_logprobs', () => {
  let cacheDir: string;
  let server: ServeServer;
  let inProcess: OnnxModelClient;

  beforeAll(async () => {
    cacheDir = mkdtempSync(join(tmpdir(), 'hat-serve-processed-'));
    server = await startServeServer({
      model: 'dummy:bytes?layers=1&hidden=16&heads=2&kvHeads=1&seed=processed',
      cacheDir,
      logprobsMode: 'processed_logprobs',
    });
    inProcess = new OnnxModelClient({ modelDir: server.modelDir });
  });

  afterAll(async () => {
    await server?.close();
    await inProcess?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  it('reports the mode, and logprobs of the tempered top-k distribution the tokens were sampled from', async () => {
    const models = (await (await fetch(`${server.baseUrl}/models`)).json()) as any;
    expect(models.data[0].logprobs_mode).toBe('processed_logprobs');
    const promptIds = [5, 6, 7, 8];
    const response = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        prompt: promptIds,
        max_tokens: 6,
        temperature: 0.5,
        top_k: 4,
        seed: 9,
        logprobs: 4,
        return_token_ids: true,
        return_tokens_as_token_ids: true,
      }),
    });
    const choice = ((await response.json()) as any).choices[0];
    const expected = await inProcess.generate(promptIds, {
      maxNewTokens: 6,
      temperature: 0.5,
      topK: 4,
      seed: 9,
      logprobs: true,
      topLogprobs: 4,
    });
    expect(choice.token_ids).toEqual(expected.tokenIds);
    expected.tokens!.forEach((token, index) => {
      // Renormalized over the 4 kept tokens at temperature 0.5: they sum to one (keyed by id: byte tokens can share a text).
      const kept = token.top!;
      const logMass = Math.log(kept.reduce((sum, entry) => sum + Math.exp(entry.logprob), 0));
      expect(choice.logprobs.token_logprobs[index]).toBeCloseTo(token.logprob - logMass, 4);
      const top = Object.values(choice.logprobs.top_logprobs[index] as Record<string, number>);
      expect(top.reduce((sum, logprob) => sum + Math.exp(logprob), 0)).toBeCloseTo(1, 4);
    });
  });

  it('renormalizes over the top-p nucleus too, as the sampler chose it', async () => {
    const promptIds = [9, 10, 11];
    const response = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        prompt: promptIds,
        max_tokens: 6,
        temperature: 0.7,
        top_p: 0.8,
        seed: 4,
        logprobs: 0,
        return_token_ids: true,
      }),
    });
    const choice = ((await response.json()) as any).choices[0];
    const vocabularySize = (await inProcess.info()).vocabularySize;
    const expected = await inProcess.generate(promptIds, {
      maxNewTokens: 6,
      temperature: 0.7,
      topP: 0.8,
      seed: 4,
      logprobs: true,
      topLogprobs: vocabularySize,
    });
    expect(choice.token_ids).toEqual(expected.tokenIds);
    expected.tokens!.forEach((token, index) => {
      // The nucleus: the most likely tokens (at temperature 0.7) until their mass reaches 0.8.
      let mass = 0;
      for (const entry of token.top!) {
        mass += Math.exp(entry.logprob);
        if (mass >= 0.8) break;
      }
      expect(choice.logprobs.token_logprobs[index]).toBeCloseTo(token.logprob - Math.log(mass), 3);
    });
  });
});

describe('hat serve with a generation_config.json', () => {
  let directory: string;
  let server: ServeServer;
  let inProcess: OnnxModelClient;

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), 'hat-serve-genconfig-'));
    const modelDir = makeDummyDecoder({
      outDir: join(directory, 'model'),
      tokenizer: 'bytes',
      layers: 1,
      hidden: 16,
      heads: 2,
      kvHeads: 1,
      seed: 'genconfig',
    }).outDir;
    writeFileSync(join(modelDir, 'generation_config.json'), JSON.stringify({ temperature: 0.4, top_k: 5, top_p: 0.9 }));
    server = await startServeServer({ model: modelDir });
    inProcess = new OnnxModelClient({ modelDir });
  });

  afterAll(async () => {
    await server?.close();
    await inProcess?.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('samples with its temperature, top_k and top_p when the request leaves them out, as vLLM does', async () => {
    const promptIds = [30, 31, 32];
    const response = await fetch(`${server.baseUrl}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: promptIds, max_tokens: 12, seed: 6, return_token_ids: true, ignore_eos: true }),
    });
    const choice = ((await response.json()) as any).choices[0];
    const expected = await inProcess.generate(promptIds, {
      maxNewTokens: 12,
      temperature: 0.4,
      topK: 5,
      topP: 0.9,
      seed: 6,
      stopTokenIds: [],
    });
    expect(choice.token_ids).toEqual(expected.tokenIds);
  });
});
