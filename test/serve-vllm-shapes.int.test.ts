import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServeServer, type ServeServer } from '../serve';

/**
 * The same requests replayed to `hat serve` and compared, field by field, with vLLM's responses
 * (test/fixtures/vllm-responses.json says where they come from): every field vLLM sends is there
 * and no other, each holding the same kind of value (string, number, null, list, object). Values
 * differ (another model), shapes must not.
 */

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
    expect(shape(await response.json())).toEqual(shape(vllm.chat));
  });

  it('a body that is not declared JSON: 400 in the OpenAI error shape', async () => {
    for (const path of ['/completions', '/chat/completions']) {
      const response = await send(path, { prompt: 'Hello' }, 'text/plain');
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual(vllm.notJson);
    }
  });
});
