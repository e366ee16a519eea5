import { OpenAiTestServer, type PromptScorer } from './support/openai-test-server';

/** Reads a raw SSE body into its data payloads, the way any OpenAI client sees them. */
async function ssePayloads(response: Response): Promise<string[]> {
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => block.slice('data: '.length));
}

/** Response bodies are checked field by field, so they are read untyped. */
async function jsonOf(response: Response | Promise<Response>): Promise<any> {
  return (await response).json();
}

async function postJson(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** A tiny "model": the logprob of token t after any prefix is -t/10; the best next token is 1. */
const tableScorer: PromptScorer = {
  score: (tokenIds, { topK }) => ({
    positions: tokenIds.map((tokenId, position) =>
      position === 0
        ? null
        : {
            logprob: -tokenId / 10,
            rank: tokenId,
            top: Array.from({ length: topK }, (_, index) => ({ tokenId: index + 1, logprob: -(index + 1) / 10 })),
          },
    ),
    next: Array.from({ length: Math.max(1, topK) }, (_, index) => ({ tokenId: index + 1, logprob: -(index + 1) / 10 })),
  }),
  decode: (tokenId) => `t${tokenId}`,
};

let server: OpenAiTestServer;
afterEach(async () => server?.close());

describe('openai test server', () => {
  test('streams chat.completion.chunk events in the order real servers send them', async () => {
    server = await OpenAiTestServer.start({
      responder: () => ({
        content: 'hello there',
        toolCalls: [{ id: 'call_x', name: 'lookup', arguments: { q: 'coat' } }],
        promptTokens: 9,
      }),
    });
    const response = await postJson(`${server.baseUrl}/chat/completions`, {
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const payloads = await ssePayloads(response);
    expect(payloads.at(-1)).toBe('[DONE]');
    const chunks = payloads.slice(0, -1).map((payload) => JSON.parse(payload));
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id === chunks[0].id)).toBe(true);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const usageChunk = chunks.at(-1);
    expect(usageChunk.choices).toEqual([]);
    expect(usageChunk.usage).toEqual({ prompt_tokens: 9, completion_tokens: 3 + 1 + 2, total_tokens: 15 });
    expect(chunks.at(-2).choices[0]).toMatchObject({ delta: {}, finish_reason: 'tool_calls' });
    const toolDeltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta?.tool_calls ?? []);
    expect(toolDeltas[0]).toEqual({
      index: 0,
      id: 'call_x',
      type: 'function',
      function: { name: 'lookup', arguments: '' },
    });
    expect(toolDeltas.slice(1).every((delta) => delta.id === undefined && delta.function.name === undefined)).toBe(
      true,
    );
    expect(toolDeltas.map((delta) => delta.function.arguments).join('')).toBe('{"q":"coat"}');
    expect(server.requests[0]?.body.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });

  test('answers stream: false with one chat.completion and lists its models', async () => {
    server = await OpenAiTestServer.start({
      models: ['qwen3-0.6b'],
      responder: () => ({ content: 'plain', reasoning: 'hmm' }),
    });
    const body = await jsonOf(
      postJson(`${server.baseUrl}/chat/completions`, {
        model: 'qwen3-0.6b',
        messages: [{ role: 'user', content: 'x' }],
      }),
    );
    expect(body).toMatchObject({
      object: 'chat.completion',
      choices: [{ message: { role: 'assistant', content: 'plain', reasoning_content: 'hmm' }, finish_reason: 'stop' }],
      usage: { completion_tokens: 3 },
    });
    const models = await jsonOf(fetch(`${server.baseUrl}/models`));
    expect(models.data.map((model: { id: string }) => model.id)).toEqual(['qwen3-0.6b']);
  });

  test('rejects requests without messages as a real server would', async () => {
    server = await OpenAiTestServer.start();
    const response = await postJson(`${server.baseUrl}/chat/completions`, { model: 'test-model', messages: [] });
    expect(response.status).toBe(400);
    expect((await jsonOf(response)).error.param).toBe('messages');
  });

  test('exposes vLLM spec-decode counters that tests set and responses advance', async () => {
    server = await OpenAiTestServer.start({
      specDecode: { draftTokens: 3, acceptanceProbability: 0.6 },
      seed: 'metrics',
    });
    server.metrics.set('vllm:spec_decode_num_drafts_total', 100);
    server.metrics.increment('vllm:spec_decode_num_accepted_tokens_per_pos_total', 5, { position: '2' });
    const before = await (await fetch(`${server.url}/metrics`)).text();
    expect(before).toContain('# TYPE vllm:spec_decode_num_drafts_total counter');
    expect(before).toContain('vllm:spec_decode_num_drafts_total{model_name="test-model",engine="0"} 100');
    expect(before).toContain(
      'vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="test-model",engine="0",position="2"} 5',
    );
    await (
      await postJson(`${server.baseUrl}/chat/completions`, {
        model: 'test-model',
        messages: [{ role: 'user', content: 'a long enough question' }],
        stream: true,
      })
    ).text();
    const after = await (await fetch(`${server.url}/metrics`)).text();
    const value = (name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(after)?.[1]);
    const drafts = value('vllm:spec_decode_num_drafts_total') - 100;
    const draftTokens = value('vllm:spec_decode_num_draft_tokens_total');
    const accepted = value('vllm:spec_decode_num_accepted_tokens_total');
    expect(drafts).toBeGreaterThan(0);
    expect(draftTokens).toBe(drafts * 3);
    expect(accepted).toBeLessThanOrEqual(draftTokens);
    // Every generated token is either an accepted draft token or the one token each step samples itself.
    expect(accepted + drafts).toBeGreaterThanOrEqual(value('vllm:generation_tokens_total'));
  });

  test('serves vLLM prompt_logprobs for a token-id prompt through the pluggable scorer', async () => {
    server = await OpenAiTestServer.start({ scorer: tableScorer });
    const body = await jsonOf(
      postJson(`${server.baseUrl}/completions`, {
        model: 'test-model',
        prompt: [5, 3, 7],
        max_tokens: 1,
        prompt_logprobs: 2,
        temperature: 1,
      }),
    );
    const [choice] = body.choices;
    expect(choice.prompt_logprobs).toEqual([
      null,
      {
        '3': { logprob: -0.3, rank: 3, decoded_token: 't3' },
        '1': { logprob: -0.1, rank: 1, decoded_token: 't1' },
        '2': { logprob: -0.2, rank: 2, decoded_token: 't2' },
      },
      {
        '7': { logprob: -0.7, rank: 7, decoded_token: 't7' },
        '1': { logprob: -0.1, rank: 1, decoded_token: 't1' },
        '2': { logprob: -0.2, rank: 2, decoded_token: 't2' },
      },
    ]);
    expect(choice.text).toBe('t1');
    expect(body.usage).toEqual({ prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 });
  });

  test('serves SGLang /generate input_token_logprobs for input_ids', async () => {
    server = await OpenAiTestServer.start({ scorer: tableScorer });
    const body = await jsonOf(
      postJson(`${server.url}/generate`, {
        input_ids: [4, 2, 6],
        sampling_params: { max_new_tokens: 0, temperature: 1 },
        return_logprob: true,
        logprob_start_len: 0,
        top_logprobs_num: 1,
      }),
    );
    expect(body.meta_info.input_token_logprobs).toEqual([
      [null, 4, null],
      [-0.2, 2, null],
      [-0.6, 6, null],
    ]);
    expect(body.meta_info.input_top_logprobs).toEqual([null, [[-0.1, 1, null]], [[-0.1, 1, null]]]);
    expect(body.meta_info).toMatchObject({
      prompt_tokens: 3,
      completion_tokens: 0,
      finish_reason: { type: 'length', length: 0 },
    });
  });

  test('answers scoring requests with 501 when no scorer is plugged in', async () => {
    server = await OpenAiTestServer.start();
    const response = await postJson(`${server.url}/generate`, { input_ids: [1, 2] });
    expect(response.status).toBe(501);
  });
});
