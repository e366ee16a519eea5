import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServeServer, type ServeServer } from '../serve';
import { toolCallDeltas } from '../serve/chat-completions-handler';

/**
 * The same requests replayed to `hat serve` and compared, field by field, with vLLM's responses
 * (test/fixtures/vllm-responses.json says where they come from): every field vLLM sends is there
 * and no other, each holding the same kind of value (string, number, null, list, object). Values
 * differ (another model), shapes must not. Where vLLM versions differ, hat serve's choice per field
 * (docs/byte-exact.md) is checked against both versions' shapes.
 */

/** A copy of a fixture with some of its fields changed (`undefined` removes one). */
function edited(value: Record<string, any>, edit: (copy: Record<string, any>) => void): Record<string, any> {
  const copy = structuredClone(value);
  edit(copy);
  return copy;
}

const vllm = JSON.parse(readFileSync(join(__dirname, 'fixtures', 'vllm-responses.json'), 'utf8')) as Record<
  string,
  any
>;

/** Field names and value kinds; `top_logprobs` entries of completions are token→logprob maps (their keys are tokens). */
function shape(value: unknown, key = ''): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    const items = [...new Set(value.map((item) => JSON.stringify(shape(item, key))))];
    return items.map((item) => JSON.parse(item) as unknown);
  }
  if (typeof value === 'object') {
    if (key === 'top_logprobs' && Object.values(value).every((item) => typeof item === 'number')) return 'map<number>';
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([name, item]) => [name, shape(item, name)]),
    );
  }
  return typeof value;
}

describe('hat serve answers in the shapes vLLM answers', () => {
  let cacheDir: string;
  let server: ServeServer;

  beforeAll(async () => {
    cacheDir = mkdtempSync(join(tmpdir(), 'hat-serve-shapes-'));
    server = await startServeServer({
      model: 'dummy:bytes?layers=2&hidden=32&heads=4&kvHeads=2&seed=serve-shapes',
      cacheDir,
    });
  });

  afterAll(async () => {
    await server?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const send = (path: string, body: unknown, contentType = 'application/json') =>
    fetch(`${server.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: JSON.stringify(body),
    });
  const chunksOf = async (response: Response) =>
    (await response.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: ') && event !== 'data: [DONE]')
      .map((event) => JSON.parse(event.slice('data: '.length)) as Record<string, any>);

  it('/v1/completions, not streamed, with logprobs and return_token_ids', async () => {
    const response = await send('/completions', {
      model: server.modelId,
      prompt: 'Hello',
      max_tokens: 2,
      logprobs: 1,
      return_token_ids: true,
    });
    expect(response.status).toBe(200);
    expect(shape(await response.json())).toEqual(shape(vllm.completion));
  });

  it('/v1/completions, streamed with return_token_ids and usage: the first, last and usage chunks', async () => {
    const chunks = await chunksOf(
      await send('/completions', {
        model: server.modelId,
        prompt: 'Hello',
        max_tokens: 4,
        logprobs: 1,
        return_token_ids: true,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const content = chunks.filter((chunk) => chunk.choices.length > 0);
    expect(content.length).toBeGreaterThan(0);
    // A chunk as the first one would be (a few tokens may all ride in one chunk, the last).
    const asFirst = (chunk: Record<string, any>, promptIds: unknown) =>
      shape({ ...chunk, choices: [{ ...chunk.choices[0], finish_reason: null, prompt_token_ids: promptIds }] });
    expect(asFirst(content[0], [1])).toEqual(shape(vllm.completionStream.first));
    for (const chunk of content.slice(1))
      expect(asFirst(chunk, null)).toEqual(asFirst(vllm.completionStream.first, null));
    if (content.length > 1) expect(shape(content.at(-1))).toEqual(shape(vllm.completionStream.last));
    expect(typeof content.at(-1)!.choices[0].finish_reason).toBe('string');
    expect(shape(chunks.at(-1))).toEqual(shape(vllm.completionStream.usage));
  });

  it('/v1/completions, streamed without return_token_ids: the token fields are there, null', async () => {
    const chunks = await chunksOf(
      await send('/completions', { model: server.modelId, prompt: 'Hello', max_tokens: 4, stream: true }),
    );
    expect(chunks.length).toBeGreaterThan(0);
    // Every chunk (the last one's finish_reason aside: a few tokens may all ride in it).
    for (const chunk of chunks)
      expect(shape({ ...chunk, choices: [{ ...chunk.choices[0], finish_reason: null }] })).toEqual(
        shape(vllm.completionStreamWithoutTokenIds),
      );
  });

  it('/v1/chat/completions, not streamed, with logprobs and return_token_ids', async () => {
    const response = await send('/chat/completions', {
      model: server.modelId,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
      logprobs: true,
      top_logprobs: 1,
      return_token_ids: true,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, any>;
    // Against vLLM 0.10.2-0.11: no empty tool_calls (current vLLM drops them), `reasoning` beside reasoning_content.
    const older = edited(vllm.chat, (copy) => {
      delete copy.choices[0].message.tool_calls;
      copy.choices[0].message.reasoning = null;
    });
    expect(shape(body)).toEqual(shape(older));
    // Against current vLLM: reasoning_content kept for its readers; fields of features hat serve does not have left out.
    const latest = edited(vllm.chatLatest, (copy) => {
      copy.choices[0].message.reasoning_content = null;
      delete copy.choices[0].routed_experts;
      delete copy.usage.completion_tokens_details;
      for (const field of ['prompt_text', 'ec_transfer_params', 'metrics']) delete copy[field];
    });
    expect(shape(body)).toEqual(shape(latest));
    expect(body.choices[0].message).toMatchObject({ reasoning: null, reasoning_content: null });
  });

  it('/v1/chat/completions, not streamed, without return_token_ids: the token fields are there, null', async () => {
    const response = await send('/chat/completions', {
      model: server.modelId,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
    });
    const body = (await response.json()) as Record<string, any>;
    expect(body.choices[0].token_ids).toBeNull();
    expect(body.prompt_token_ids).toBeNull();
    expect(body.choices[0].logprobs).toBeNull();
  });

  it('/v1/chat/completions, streamed with logprobs, return_token_ids and usage: role, content, finish and usage chunks, then [DONE]', async () => {
    const response = await send('/chat/completions', {
      model: server.modelId,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 6,
      logprobs: true,
      top_logprobs: 1,
      return_token_ids: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = await response.text();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const chunks = text
      .split('\n\n')
      .filter((event) => event.startsWith('data: {'))
      .map((event) => JSON.parse(event.slice('data: '.length)) as Record<string, any>);
    expect(shape(chunks[0])).toEqual(shape(vllm.chatStream.first));
    const usage = chunks.at(-1)!;
    expect(shape(usage)).toEqual(shape(vllm.chatStream.usage));
    const finish = chunks.at(-2)!;
    expect(typeof finish.choices[0].finish_reason).toBe('string');
    // The finishing chunk carries the last tokens' delta (possibly empty text) and the stop reason.
    expect(shape(finish)).toEqual(shape(vllm.chatStream.last));
    const content = chunks.slice(1, -2);
    for (const chunk of content) expect(shape(chunk)).toEqual(shape(vllm.chatStream.content));
    // Every generated token's id is in exactly one chunk, as vLLM streams them.
    const ids = [...content, finish].flatMap((chunk) => chunk.choices[0].token_ids);
    expect(ids).toHaveLength(usage.usage.completion_tokens);
  });

  it('/v1/chat/completions, streamed without return_token_ids or logprobs: prompt_token_ids and token_ids null', async () => {
    const chunks = await chunksOf(
      await send('/chat/completions', {
        model: server.modelId,
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 6,
        stream: true,
      }),
    );
    expect(shape(chunks[0])).toEqual(shape(vllm.chatStreamWithoutTokenIds.first));
    for (const chunk of chunks.slice(1, -1))
      expect(shape(chunk)).toEqual(shape(vllm.chatStreamWithoutTokenIds.content));
    expect(shape(chunks.at(-1))).toEqual(
      shape(
        edited(vllm.chatStream.last, (copy) => {
          copy.choices[0].logprobs = null;
          copy.choices[0].token_ids = null;
        }),
      ),
    );
  });

  it('streamed tool calls: a delta with index, id, type and name, then one with the arguments', () => {
    const [name, args] = toolCallDeltas([
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
    ]);
    expect(shape(name)).toEqual(shape(vllm.chatStream.toolCallName.choices[0].delta));
    expect(shape(args)).toEqual(shape(vllm.chatStream.toolCallArguments.choices[0].delta));
  });

  it('a body that is not declared JSON: 400 in the OpenAI error shape', async () => {
    for (const path of ['/completions', '/chat/completions']) {
      const response = await send(path, { prompt: 'Hello' }, 'text/plain');
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual(vllm.notJson);
    }
  });
});
