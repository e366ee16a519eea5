import { StringDecoder } from 'node:string_decoder';
import fc from 'fast-check';
import { HatError } from '../../errors';
import type { EndpointContext } from '../model-errors';
import { ChatStreamAssembler } from './chat-stream-assembler';

const context: EndpointContext = { url: 'http://model.test/v1/chat/completions', model: 'm', redact: (text) => text };

function chunk(delta: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    id: 'c1',
    object: 'chat.completion.chunk',
    model: 'served-model',
    choices: [{ index: 0, delta, finish_reason: null, ...extra }],
  });
}

/** A realistic stream: role chunk, content, two tool calls in fragments, finish, usage, [DONE]. */
const events = [
  chunk({ role: 'assistant', content: '' }),
  chunk({ content: '好的，' }),
  chunk({ content: 'checking 🧥' }),
  chunk({
    tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'item_detail', arguments: '' } }],
  }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"itemId":' } }] }),
  chunk({
    tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'sku_stock', arguments: '{"sku"' } }],
  }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: ' "雾蓝-M"}' } }] }),
  chunk({ tool_calls: [{ index: 1, function: { arguments: ': "A1"}' } }] }),
  chunk({}, { finish_reason: 'tool_calls' }),
  JSON.stringify({
    id: 'c1',
    object: 'chat.completion.chunk',
    choices: [],
    usage: { prompt_tokens: 50, completion_tokens: 12 },
  }),
  '[DONE]',
];

function sseBytes(lineEnding: '\n' | '\r\n', withComments: boolean): Buffer {
  const blocks = events.map((data) => `data: ${data}${lineEnding}${lineEnding}`);
  if (withComments) blocks.splice(2, 0, `: keep-alive${lineEnding}${lineEnding}`);
  return Buffer.from(blocks.join(''), 'utf8');
}

/** Feeds bytes cut at the given offsets, decoded as the HTTP client decodes them. */
function assemble(bytes: Buffer, cuts: number[]): ReturnType<ChatStreamAssembler['complete']> {
  const assembler = new ChatStreamAssembler(context);
  const decoder = new StringDecoder('utf8');
  const offsets = [...new Set(cuts.map((cut) => cut % bytes.length))].sort((left, right) => left - right);
  let previous = 0;
  offsets.forEach((offset, index) => {
    assembler.feed(decoder.write(bytes.subarray(previous, offset)), index);
    previous = offset;
  });
  assembler.feed(decoder.write(bytes.subarray(previous)) + decoder.end(), offsets.length);
  expect(assembler.done).toBe(true);
  return assembler.complete();
}

describe('ChatStreamAssembler', () => {
  test('any split of the byte stream (inside characters, lines, CRLF pairs) gives the same message', () => {
    const expected = assemble(sseBytes('\n', false), []);
    expect(expected.message).toEqual({
      role: 'assistant',
      content: '好的，checking 🧥',
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'item_detail', arguments: '{"itemId": "雾蓝-M"}' } },
        { id: 'call_b', type: 'function', function: { name: 'sku_stock', arguments: '{"sku": "A1"}' } },
      ],
    });
    expect(expected.usage).toEqual({ promptTokens: 50, completionTokens: 12 });
    fc.assert(
      fc.property(
        fc.array(fc.nat(), { maxLength: 40 }),
        fc.constantFrom<'\n' | '\r\n'>('\n', '\r\n'),
        fc.boolean(),
        (cuts, lineEnding, comments) => {
          const result = assemble(sseBytes(lineEnding, comments), cuts);
          expect(result.message).toEqual(expected.message);
          expect(result.usage).toEqual(expected.usage);
          expect(result.finishReason).toBe('tool_calls');
          expect(result.chunkCount).toBe(9);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('TTFT is the first choices-bearing chunk (role only); the usage chunk and [DONE] do not move E2E', () => {
    const assembler = new ChatStreamAssembler(context);
    assembler.feed(`data: ${chunk({ role: 'assistant' })}\n\n`, 10);
    assembler.feed(`data: ${chunk({ content: 'a' })}\n\ndata: ${chunk({ content: 'b' })}\n\n`, 15);
    assembler.feed(`data: ${chunk({}, { finish_reason: 'stop' })}\n\n`, 22);
    assembler.feed(
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } })}\n\n`,
      40,
    );
    assembler.feed('data: [DONE]\n\n', 41);
    const result = assembler.complete();
    expect([result.ttftMs, result.e2eMs, result.itlMs, result.chunkCount]).toEqual([10, 22, [5, 0, 7], 4]);
    expect(result.message.content).toBe('ab');
    expect(result.model).toBe('served-model');
  });

  test('reads vLLM token-id logprobs, reasoning deltas and estimates usage when none is reported', () => {
    const assembler = new ChatStreamAssembler(context);
    const logprobs = {
      content: [
        {
          token: 'token_id:42',
          logprob: -0.5,
          top_logprobs: [
            { token: 'token_id:42', logprob: -0.5 },
            { token: 'token_id:7', logprob: -1.5 },
          ],
        },
      ],
    };
    assembler.feed(`data: ${chunk({ reasoning: 'hm' })}\n\ndata: ${chunk({ content: 'x' }, { logprobs })}\n\n`, 1);
    assembler.feed(`data: ${chunk({}, { finish_reason: 'length' })}\n\n`, 2);
    const result = assembler.complete();
    expect(result.message.reasoning_content).toBe('hm');
    expect(result.logprobs).toEqual([
      {
        token: 'token_id:42',
        tokenId: 42,
        logprob: -0.5,
        top: [
          { token: 'token_id:42', tokenId: 42, logprob: -0.5 },
          { token: 'token_id:7', tokenId: 7, logprob: -1.5 },
        ],
      },
    ]);
    expect(result.usage).toEqual({ promptTokens: 0, completionTokens: 2, estimated: true });
    expect(result.finishReason).toBe('length');
  });

  test('a mid-stream error event and invalid JSON become retryable model errors', () => {
    const failing = new ChatStreamAssembler(context);
    expect(() => failing.feed('data: {"object":"error","message":"engine dead","code":500}\n\n', 1)).toThrow(
      /\[MODEL_SERVER_ERROR\].*engine dead/,
    );
    const garbage = new ChatStreamAssembler(context);
    let thrown: unknown;
    try {
      garbage.feed('data: {"choices": [\n\n', 1);
    } catch (error) {
      thrown = error;
    }
    expect(HatError.isInstance(thrown) && thrown.code === 'MODEL_BAD_RESPONSE' && thrown.retryable).toBe(true);
    expect(() => new ChatStreamAssembler(context).complete()).toThrow(/MODEL_BAD_RESPONSE/);
  });

  test('a plain chat.completion body (a server that ignores stream: true) is read too', () => {
    const assembler = new ChatStreamAssembler(context);
    assembler.acceptCompletion(
      JSON.stringify({
        model: 'm2',
        choices: [
          {
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: { a: 1 } } }],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 4 },
      }),
      12,
    );
    const result = assembler.complete();
    expect(result.message.tool_calls?.[0]?.function.arguments).toBe('{"a":1}');
    expect([result.ttftMs, result.e2eMs, result.chunkCount]).toEqual([12, 12, 1]);
  });

  test('logprobs of a plain chat.completion body and of a stream: choices[].logprobs.content[] with token, logprob and bytes', () => {
    const content = [
      { token: 'Hi', logprob: -0.25, bytes: [72, 105], top_logprobs: [] },
      { token: '\u00e9', logprob: -1.5, bytes: [195, 169] },
    ];
    const plain = new ChatStreamAssembler(context);
    plain.acceptCompletion(
      JSON.stringify({
        model: 'm',
        choices: [
          { message: { role: 'assistant', content: 'Hi\u00e9' }, logprobs: { content }, finish_reason: 'stop' },
        ],
        usage: { prompt_tokens: 1, completion_tokens: 2 },
      }),
      5,
    );
    const expected = [
      { token: 'Hi', logprob: -0.25, bytes: [72, 105] },
      { token: '\u00e9', logprob: -1.5, bytes: [195, 169] },
    ];
    expect(plain.complete().logprobs).toEqual(expected);
    const streamed = new ChatStreamAssembler(context);
    streamed.feed(
      `data: ${chunk({ content: 'Hi' }, { logprobs: { content: [content[0]] } })}\n\ndata: ${chunk({ content: '\u00e9' }, { logprobs: { content: [content[1]] } })}\n\n`,
      1,
    );
    streamed.feed(`data: ${chunk({}, { finish_reason: 'stop' })}\n\ndata: [DONE]\n\n`, 2);
    expect(streamed.complete().logprobs).toEqual(expected);
    // An API that omits logprobs (or sends null) yields none.
    const omitted = new ChatStreamAssembler(context);
    omitted.feed(
      `data: ${chunk({ content: 'x' }, { logprobs: null })}\n\ndata: ${chunk({}, { finish_reason: 'stop' })}\n\n`,
      1,
    );
    expect(omitted.complete().logprobs).toBeUndefined();
  });
});

describe('first answer text', () => {
  it('times the first content chunk, after reasoning and role chunks; absent when only tools were called', () => {
    const reasoned = new ChatStreamAssembler(context);
    const feed = (assembler: ChatStreamAssembler, data: string, atMs: number) =>
      assembler.feed(`data: ${data}\n\n`, atMs);
    feed(reasoned, chunk({ role: 'assistant', content: '' }), 10);
    feed(reasoned, chunk({ reasoning_content: 'the viewer asks the price' }), 25);
    feed(reasoned, chunk({ content: 'It is 299 yuan.' }), 40);
    feed(reasoned, chunk({}, { finish_reason: 'stop' }), 41);
    feed(reasoned, '[DONE]', 42);
    expect(reasoned.complete()).toMatchObject({ ttftMs: 10, firstContentMs: 40, e2eMs: 41 });
    const toolsOnly = new ChatStreamAssembler(context);
    feed(
      toolsOnly,
      chunk({
        tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'item_detail', arguments: '{}' } }],
      }),
      5,
    );
    feed(toolsOnly, '[DONE]', 6);
    expect(toolsOnly.complete().firstContentMs).toBeUndefined();
  });
});
