import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { BadInputError, HatError, TransientError } from '../shared/errors';
import type { ChatRequest, ModelClient } from '../shared/models/model-client';
import type { ModelClock } from '../shared/models/model-clock';
import { createModelClient } from '../shared/models/model-registry';
import { OpenAiTestServer, type OpenAiTestServerOptions } from './support/openai-test-server';

/** A clock whose sleeps are recorded and return at once, so retry waits are checked exactly. */
function recordingClock(): ModelClock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return { sleeps, now: () => Date.now(), sleep: async (ms) => void sleeps.push(ms) };
}

const question: ChatRequest = { messages: [{ role: 'user', content: '这件外套有几个颜色？' }] };

let server: OpenAiTestServer;
const clients: ModelClient[] = [];

async function startServer(options: OpenAiTestServerOptions = {}): Promise<OpenAiTestServer> {
  server = await OpenAiTestServer.start({ keepAliveComments: true, ...options });
  return server;
}

function clientFor(
  overrides: Record<string, unknown> = {},
  dependencies: Parameters<typeof createModelClient>[1] = {},
): ModelClient {
  const client = createModelClient(
    { adapter: 'openai', baseUrl: server.baseUrl, model: 'test-model', retryInitialDelayMs: 5, ...overrides },
    dependencies,
  );
  clients.push(client);
  return client;
}

async function rejectionOf(promise: Promise<unknown>): Promise<HatError> {
  try {
    await promise;
  } catch (error) {
    if (!HatError.isInstance(error)) throw error;
    return error;
  }
  throw new Error('expected the call to fail');
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close?.()));
  await server?.close();
});

describe('openai client streaming', () => {
  test('tool-call arguments split across chunks and network reads assemble to the exact JSON', async () => {
    const argumentsJson = JSON.stringify({
      item: { id: 'sku-42', colors: ['雾蓝', 'black'] },
      quantity: 2,
      note: 'size "M" \\ fits',
    });
    await startServer({
      splitEvents: true,
      responder: () => ({
        toolCalls: [{ id: 'call_abc', name: 'check_stock', arguments: argumentsJson }],
        argumentFragmentChars: 3,
      }),
    });
    const response = await clientFor().chat(question);
    expect(response.message.tool_calls).toEqual([
      { id: 'call_abc', type: 'function', function: { name: 'check_stock', arguments: argumentsJson } },
    ]);
    expect(response.message.content).toBeNull();
    expect(response.finishReason).toBe('tool_calls');
    expect(response.timings.chunkCount).toBeGreaterThan(argumentsJson.length / 3);
    const sent = server.chatRequests[0]?.body;
    expect(sent).toMatchObject({
      model: 'test-model',
      stream: true,
      stream_options: { include_usage: true },
      messages: question.messages,
    });
  });

  test('two parallel tool calls with interleaved fragments come back in index order', async () => {
    await startServer({
      responder: () => ({
        content: '我查一下',
        interleaveToolCalls: true,
        argumentFragmentChars: 4,
        toolCalls: [
          { id: 'call_0', name: 'item_detail', arguments: { itemId: 'A1', fields: ['price', 'colors'] } },
          { id: 'call_1', name: 'promotions', arguments: { itemId: 'A1' } },
        ],
      }),
    });
    const response = await clientFor().chat(question);
    expect(response.message.content).toBe('我查一下');
    expect(
      response.message.tool_calls?.map((call) => [call.id, call.function.name, JSON.parse(call.function.arguments)]),
    ).toEqual([
      ['call_0', 'item_detail', { itemId: 'A1', fields: ['price', 'colors'] }],
      ['call_1', 'promotions', { itemId: 'A1' }],
    ]);
  });

  test('timings follow vllm bench: ttft after the prefill delay, ttft <= e2e, one ITL gap per chunk after the first', async () => {
    await startServer({
      timing: { ttftMs: 30, tokenDelayMs: 3 },
      responder: () => ({ content: 'abcdefghijklmnopqrst', contentPieceChars: 4, reasoning: 'think' }),
    });
    const onChunk = jest.fn();
    const response = await clientFor().chat({ ...question, onChunk });
    const { timings } = response;
    // role chunk + 2 reasoning pieces + 5 content pieces + finish chunk; the usage chunk does not count
    expect(timings.chunkCount).toBe(9);
    expect(onChunk).toHaveBeenCalledTimes(9);
    expect(timings.itlMs).toHaveLength(8);
    expect(timings.ttftMs).toBeGreaterThanOrEqual(30);
    expect(timings.ttftMs).toBeLessThanOrEqual(timings.e2eMs);
    const itlSum = (timings.itlMs ?? []).reduce((sum, gap) => sum + gap, 0);
    expect(itlSum).toBeCloseTo(timings.e2eMs - timings.ttftMs, 6);
    expect(timings.startedAt).toBeGreaterThan(Date.now() - 60_000);
    expect(response.message.reasoning_content).toBe('think');
    expect(response.message.content).toBe('abcdefghijklmnopqrst');
  });

  test('usage comes from the usage chunk (choices: []), including cached prompt tokens', async () => {
    await startServer({
      responder: () => ({ content: 'twelve chars', contentPieceChars: 3, promptTokens: 321, cachedPromptTokens: 256 }),
    });
    const response = await clientFor().chat(question);
    expect(response.usage).toEqual({ promptTokens: 321, completionTokens: 4, cachedPromptTokens: 256 });
  });

  test('logprobs with top alternatives are parsed per token', async () => {
    await startServer({
      responder: () => ({ content: '红色和蓝色', contentPieceChars: 2, logprobs: [-0.1, -0.7, -2.5] }),
    });
    const response = await clientFor().chat({ ...question, logprobs: true, topLogprobs: 3 });
    expect(response.logprobs?.map((entry) => [entry.token, entry.logprob, entry.top?.length])).toEqual([
      ['红色', -0.1, 3],
      ['和蓝', -0.7, 3],
      ['色', -2.5, 3],
    ]);
    expect(server.chatRequests[0]?.body).toMatchObject({ logprobs: true, top_logprobs: 3 });
  });

  test('sampling defaults from the config are sent, request values and extraBody win', async () => {
    await startServer();
    const client = clientFor({
      sampling: { temperature: 0.2, topP: 0.9, maxTokens: 64, seed: 7 },
      extraBody: { chat_template_kwargs: { enable_thinking: false } },
    });
    await client.chat({ ...question, temperature: 0.8, extraBody: { top_k: 20 } });
    expect(server.chatRequests[0]?.body).toMatchObject({
      temperature: 0.8,
      top_p: 0.9,
      max_tokens: 64,
      seed: 7,
      top_k: 20,
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(client.sampling).toEqual({ temperature: 0.2, topP: 0.9, maxTokens: 64, seed: 7 });
  });
});

describe('openai client retries', () => {
  test('429 with Retry-After in seconds is waited out exactly as the header says', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 429, retryAfter: '2', message: 'slow down' }, 2);
    const clock = recordingClock();
    const response = await clientFor({}, { clock }).chat(question);
    expect(response.attempts).toBe(3);
    expect(clock.sleeps).toEqual([2000, 2000]);
    expect(server.chatRequests).toHaveLength(3);
  });

  test('429 with Retry-After as an HTTP date waits until that date', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 429, retryAfter: new Date(Date.now() + 5000).toUTCString() });
    const clock = recordingClock();
    await clientFor({}, { clock }).chat(question);
    expect(clock.sleeps).toHaveLength(1);
    // The date has one-second resolution and some time passes before the client reads it.
    expect(clock.sleeps[0]).toBeGreaterThan(1000);
    expect(clock.sleeps[0]).toBeLessThanOrEqual(5000);
  });

  test('retry-after-ms is honoured in real time and holds back the whole endpoint', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 429, retryAfterMs: 300 });
    const client = clientFor();
    const started = performance.now();
    const [first, second] = await Promise.all([
      client.chat(question),
      new Promise((resolve) => setTimeout(resolve, 50)).then(() => client.chat(question)),
    ]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(300);
    expect(first.attempts).toBe(2);
    // The second call started after the 429 and waited for the pause instead of hitting the server.
    expect(second.attempts).toBe(1);
    expect(second.timings.queueMs).toBeGreaterThan(150);
  });

  test('a 500 is retried after exponential backoff with jitter, then succeeds', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 500, message: 'engine crashed' });
    const clock = recordingClock();
    const response = await clientFor({ retryInitialDelayMs: 400 }, { clock, random: () => 0.5 }).chat(question);
    expect(response.attempts).toBe(2);
    expect(clock.sleeps).toEqual([350]);
    expect(response.message.content).toBe(`echo: ${question.messages[0]?.content}`);
  });

  test('a stream dropped mid-way is retried and the retry gives the whole message', async () => {
    await startServer({ responder: () => ({ content: 'a complete answer about the coat', contentPieceChars: 3 }) });
    server.injectFault({ kind: 'drop-mid-stream', afterChunks: 4 });
    const response = await clientFor().chat(question);
    expect(response.attempts).toBe(2);
    expect(response.message.content).toBe('a complete answer about the coat');
    expect(response.timings.retryMs).toBeGreaterThan(0);
  });

  test('an error event inside the stream is retried', async () => {
    await startServer();
    server.injectFault({ kind: 'stream-error', afterChunks: 2, message: 'CUDA out of memory' });
    const response = await clientFor().chat(question);
    expect(response.attempts).toBe(2);
  });

  test('a slow response hits the timeout and is retried', async () => {
    await startServer();
    server.injectFault({ kind: 'slow-first-byte', delayMs: 5000 });
    const response = await clientFor({ timeoutMs: 500 }).chat(question);
    expect(response.attempts).toBe(2);
  });

  test('a persistently slow server ends in MODEL_UNAVAILABLE with the timeout as cause', async () => {
    await startServer();
    server.injectFault({ kind: 'slow-first-byte', delayMs: 2000 }, 3);
    const error = await rejectionOf(clientFor({ timeoutMs: 150, maxRetries: 2 }).chat(question));
    expect(error).toBeInstanceOf(TransientError);
    expect(error.code).toBe('MODEL_UNAVAILABLE');
    expect(error.message).toMatch(/^\[MODEL_UNAVAILABLE\] .*failed 3 attempts; last: \[MODEL_TIMEOUT\]/);
    expect((error.cause as HatError).code).toBe('MODEL_TIMEOUT');
    expect(server.chatRequests).toHaveLength(3);
  });

  test('a connection refused is retried and reported as MODEL_UNAVAILABLE', async () => {
    await startServer();
    const deadUrl = server.baseUrl;
    await server.close();
    const client = createModelClient({
      adapter: 'openai',
      baseUrl: deadUrl,
      model: 'test-model',
      maxRetries: 1,
      retryInitialDelayMs: 1,
    });
    clients.push(client);
    const error = await rejectionOf(client.chat(question));
    expect(error.code).toBe('MODEL_UNAVAILABLE');
    expect((error.cause as HatError).code).toBe('MODEL_CONNECTION_FAILED');
    expect(error.message).toContain('ECONNREFUSED');
    server = await OpenAiTestServer.start();
  });

  test('a 400 is permanent: not retried, BadInputError with the server message', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 400, message: "This model's maximum context length is 4096 tokens" });
    const error = await rejectionOf(clientFor().chat(question));
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.code).toBe('MODEL_BAD_REQUEST');
    expect(error.exitCode).toBe(2);
    expect(error.message).toContain('maximum context length is 4096 tokens');
    expect(server.chatRequests).toHaveLength(1);
  });

  test('a Retry-After longer than maxRetryAfterMs ends the call at once, carrying the hint for the job queue', async () => {
    await startServer();
    server.injectFault({ kind: 'status', status: 503, retryAfter: '600' });
    const clock = recordingClock();
    const error = await rejectionOf(clientFor({ maxRetryAfterMs: 60_000 }, { clock }).chat(question));
    expect(error.code).toBe('MODEL_UNAVAILABLE');
    expect((error as TransientError).retryAfterMs).toBe(600_000);
    expect(clock.sleeps).toEqual([]);
  });

  test('an abort by the caller stops the call without retrying', async () => {
    await startServer();
    server.injectFault({ kind: 'slow-first-byte', delayMs: 2000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const error = await rejectionOf(clientFor().chat({ ...question, signal: controller.signal }));
    expect(error.code).toBe('MODEL_ABORTED');
    expect(server.chatRequests).toHaveLength(1);
  });
});

describe('openai client limits', () => {
  test('a concurrency limit of 2 holds for 6 parallel calls from two clients of one endpoint', async () => {
    await startServer({ timing: { ttftMs: 20, tokenDelayMs: 5 } });
    const first = clientFor({ concurrency: 2 });
    const second = clientFor({ concurrency: 4 });
    const responses = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((index) => (index % 2 === 0 ? first : second).chat(question)),
    );
    expect(server.maxInFlight).toBe(2);
    expect(server.chatRequests).toHaveLength(6);
    expect(responses.filter((response) => response.timings.queueMs > 10).length).toBeGreaterThanOrEqual(4);
  });
});

describe('openai client API keys', () => {
  const secret = 'sk-test-0123456789-very-secret';

  test('the key from the named environment variable is sent as a bearer token', async () => {
    await startServer({ requiredApiKey: secret });
    const response = await clientFor(
      { apiKeyEnv: 'HAT_TEST_MODEL_KEY' },
      { environment: { HAT_TEST_MODEL_KEY: secret } },
    ).chat(question);
    expect(response.attempts).toBe(1);
    expect(server.chatRequests[0]?.headers.authorization).toBe(`Bearer ${secret}`);
  });

  test('the key from a file is sent, and a missing variable names what to set', async () => {
    await startServer({ requiredApiKey: secret });
    const directory = mkdtempSync(join(tmpdir(), 'hat-key-'));
    try {
      writeFileSync(join(directory, 'key'), `${secret}\n`);
      await clientFor({ apiKeyFile: join(directory, 'key') }).chat(question);
      expect(server.chatRequests[0]?.headers.authorization).toBe(`Bearer ${secret}`);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
    expect(() => clientFor({ apiKeyEnv: 'HAT_UNSET_KEY' }, { environment: {} })).toThrow(
      /\[MODEL_API_KEY_MISSING\] model\.apiKeyEnv names the environment variable HAT_UNSET_KEY/,
    );
  });

  test('the key never appears in JSON, inspection or errors, even when the server echoes it', async () => {
    await startServer({ requiredApiKey: 'sk-the-right-one' });
    const client = clientFor({ apiKeyEnv: 'HAT_TEST_MODEL_KEY' }, { environment: { HAT_TEST_MODEL_KEY: secret } });
    const error = await rejectionOf(client.chat(question));
    expect(server.chatRequests[0]?.headers.authorization).toBe(`Bearer ${secret}`);
    expect(error.code).toBe('MODEL_BAD_REQUEST');
    expect(error.message).toContain('Incorrect API key provided: [redacted]');
    expect(error.message).toContain('apiKeyEnv');
    const exposed = [
      JSON.stringify(client),
      inspect(client, { depth: 10, showHidden: true }),
      String(client),
      JSON.stringify(error),
      error.message,
      String(error.stack),
      inspect(error, { depth: 10 }),
      JSON.stringify(error.details),
    ];
    for (const text of exposed) expect(text).not.toContain(secret);
    expect(JSON.stringify(client)).toContain('"apiKeyEnv":"HAT_TEST_MODEL_KEY"');
  });
});

describe('openai client hook messages (issue #17)', () => {
  const withHook: ChatRequest = {
    messages: [
      { role: 'system', content: 'You are the host.' },
      { role: 'user', content: '有优惠券吗？' },
      { role: 'system', content: 'Before each reply: at most 60 characters.' },
    ],
  };

  test('sends mid-conversation system messages as they are by default', async () => {
    await startServer();
    await clientFor().chat(withHook);
    expect(server.requests.at(-1)?.body.messages.map((message: { role: string }) => message.role)).toEqual([
      'system',
      'user',
      'system',
    ]);
  });

  test('hookMessages: folded sends them folded into the neighbouring user turn, as shard and rl render them', async () => {
    await startServer();
    await clientFor({ hookMessages: 'folded' }).chat(withHook);
    const sent = server.requests.at(-1)?.body.messages as Array<{ role: string; content: string }>;
    expect(sent.map((message) => message.role)).toEqual(['system', 'user']);
    expect(sent[1]?.content).toContain('有优惠券吗？');
    expect(sent[1]?.content).toContain(
      '<system-reminder>\nBefore each reply: at most 60 characters.\n</system-reminder>',
    );
  });
});
