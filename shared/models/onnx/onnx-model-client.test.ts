/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createModelClient } from '../model-registry';
import type { ChatMessage } from '../../trajectory/messages';
import { makeDummyDecoder } from './dummy-decoder';
import { OnnxModelClient } from './onnx-model-client';
import { registerModelAdapters } from '../../../workers/register-model-adapters';

registerModelAdapters();

let workDirectory: string;
let modelDir: string;
let client: OnnxModelClient;
const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }];

beforeAll(() => {
  workDirectory = mkdtempSync(join(tmpdir(), 'hat-onnx-client-'));
  modelDir = join(workDirectory, 'tiny-model');
  makeDummyDecoder({ outDir: modelDir, tokenizer: 'bytes', hidden: 16, layers: 2, seed: 11 });
  client = new OnnxModelClient({ modelDir, intraOpThreads: 1 });
});

afterAll(async () => {
  await client?.close();
  rmSync(workDirectory, { recursive: true, force: true });
});

describe('OnnxModelClient', () => {
  it("renders the prompt with the model's own chat template", async () => {
    const model = await client.load();
    const promptIds = await client.promptIds(messages);
    // Qwen3's template (the byte tokenizer carries it): one token per byte, one per special token.
    expect(model.tokenizer.decode(promptIds, { keepSpecialTokens: true })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    const withTools = await client.promptIds(messages, [
      {
        type: 'function',
        function: {
          name: 'get_price',
          description: 'Price of an item',
          parameters: { type: 'object', properties: {} },
        },
      },
    ]);
    expect(model.tokenizer.decode(withTools, { keepSpecialTokens: true })).toContain(
      '<tools>\n{"type": "function", "function": {"name": "get_price"',
    );
    // Stored argument strings are parsed before rendering, as serving the model would show them.
    const afterToolCall = await client.promptIds([
      ...messages,
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call-1', type: 'function', function: { name: 'get_price', arguments: '{"item": "mug"}' } }],
      },
      { role: 'tool', tool_call_id: 'call-1', content: '12 EUR' },
    ]);
    const rendered = model.tokenizer.decode(afterToolCall, { keepSpecialTokens: true });
    expect(rendered).toContain('<tool_call>\n{"name": "get_price", "arguments": {"item": "mug"}}\n</tool_call>');
    expect(rendered).toContain('<|im_start|>user\n<tool_response>\n12 EUR\n</tool_response><|im_end|>');
  });

  it('answers a chat with text, usage, timings and token logprobs', async () => {
    const chunks: string[] = [];
    const response = await client.chat({
      messages,
      maxTokens: 12,
      temperature: 0.8,
      seed: 5,
      logprobs: true,
      topLogprobs: 2,
      onChunk: (chunk) => chunks.push(chunk.contentDelta ?? ''),
    });
    expect(response.model).toBe('tiny-model');
    expect(response.usage).toEqual({ promptTokens: 21, completionTokens: response.logprobs!.length });
    expect(response.finishReason).toBe('length');
    expect(response.usage.completionTokens).toBe(12);
    const model = await client.load();
    const tokenIds = response.logprobs!.map((entry) => entry.tokenId!);
    expect(response.message.content).toBe(
      model.tokenizer.decode(tokenIds.filter((tokenId) => !model.info.eosTokenIds.includes(tokenId))),
    );
    expect(chunks.join('')).toBe(response.message.content);
    expect(response.timings.ttftMs).toBeGreaterThan(0);
    expect(response.timings.e2eMs).toBeGreaterThanOrEqual(response.timings.ttftMs);
    expect(response.timings.itlMs).toHaveLength(response.usage.completionTokens - 1);
    // The logprobs are the ones scoring the same tokens at the same temperature gives.
    const scored = await client.score(await client.promptIds(messages), tokenIds, { temperature: 0.8 });
    response.logprobs!.forEach((entry, index) =>
      expect(Math.abs(entry.logprob - scored.tokens[index].logprob)).toBeLessThan(1e-4),
    );
    expect(response.logprobs![0].top).toHaveLength(2);
  });

  it('replays the same answer for the same seed and cuts at a stop string', async () => {
    const request = { messages, maxTokens: 24, temperature: 1, seed: 42 };
    const first = await client.chat(request);
    const again = await client.chat(request);
    expect(again.message.content).toBe(first.message.content);
    const content = first.message.content!;
    const stop = content.slice(8, 10);
    const cut = await client.chat({ ...request, stop: [stop] });
    expect(cut.finishReason).toBe('stop');
    expect(cut.message.content).toBe(content.slice(0, content.indexOf(stop)));
  });

  it('is built by the model registry from an `onnx` config', async () => {
    const registered = createModelClient({
      adapter: 'onnx',
      modelDir,
      intraOpThreads: 1,
      sampling: { temperature: 0, maxTokens: 4 },
    });
    try {
      expect(registered.provider).toBe('onnx');
      const response = await registered.chat({ messages });
      expect(response.usage.completionTokens).toBeLessThanOrEqual(4);
      const greedy = await client.chat({ messages, temperature: 0, maxTokens: 4 });
      expect(response.message.content).toBe(greedy.message.content);
    } finally {
      await registered.close?.();
    }
    expect(() => createModelClient({ adapter: 'onnx' })).toThrow(/\[MODEL_BAD_CONFIG\][\s\S]*model\.modelDir/);
  });

  it('reports that the model has random weights', async () => {
    const info = await client.info();
    expect(info.dummyWeights).toBe(true);
    expect(info.tokenizerFingerprint).toMatch(/^[0-9a-f]{64}$/);
  });
});
