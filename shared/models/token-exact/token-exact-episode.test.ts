/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadChatTokenizer } from '../../text/load-chat-tokenizer';
import type { ChatTokenizer } from '../../text/chat-tokenizer';
import type { ChatMessage } from '../../trajectory/messages';
import { makeDummyDecoder } from '../onnx/dummy-decoder';
import { OnnxModelClient } from '../onnx/onnx-model-client';
import { OnnxTokenScorer } from '../scoring/onnx-token-scorer';
import { createOnnxPromptScorer } from '../testing/onnx-prompt-scorer';
import { OpenAiTestServer, type PromptScorer } from '../testing/openai-test-server';
import { startServeServer, type ServeServer } from '../../../serve/serve-server';
import { InProcessTokenSampler } from './in-process-token-sampler';
import { createTokenSampler } from '../model-registry';
import { plainTextParser, stopTokenIdsOf, TokenExactEpisode } from './token-exact-episode';
import type { TokenSampler } from './token-sampler';

let workDirectory: string;
let modelDir: string;
/** The model's own template (Qwen3's: re-renders earlier turns without their reasoning). */
let tokenizer: ChatTokenizer;
/** The same vocabulary with plain ChatML (Qwen2.5 without tools): renders every turn as written. */
let chatml: ChatTokenizer;
let model: OnnxTokenScorer;
const servers: OpenAiTestServer[] = [];

beforeAll(async () => {
  workDirectory = mkdtempSync(join(tmpdir(), 'hat-token-exact-'));
  modelDir = join(workDirectory, 'policy');
  makeDummyDecoder({ outDir: modelDir, tokenizer: 'bytes', hidden: 16, layers: 2, seed: 'token-exact' });
  tokenizer = await loadChatTokenizer({ modelDir });
  chatml = await loadChatTokenizer({ modelDir, chatTemplate: chatmlTemplate });
  model = new OnnxTokenScorer(new OnnxModelClient({ modelDir, intraOpThreads: 1 }), { modelDir });
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await model?.close();
  rmSync(workDirectory, { recursive: true, force: true });
});

function served(server: OpenAiTestServer, adapter: 'vllm' | 'sglang'): TokenSampler {
  return createTokenSampler({ adapter, baseUrl: server.baseUrl, model: 'test-model', maxRetries: 0 });
}

const chatmlTemplate =
  "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a live-room host.' },
  { role: 'user', content: 'Is the blue mug in stock?' },
];

describe('served token sampling (vLLM /v1/completions and SGLang /generate shapes)', () => {
  it.each(['vllm', 'sglang'] as const)(
    "%s: greedy ids and logprobs over HTTP equal the in-process decoder's",
    async (engine) => {
      const server = await OpenAiTestServer.start({ scorer: await createOnnxPromptScorer(model, modelDir) });
      servers.push(server);
      const promptIds = tokenizer.encode(tokenizer.render(conversation, { addGenerationPrompt: true }));
      const request = {
        promptIds,
        sampling: { temperature: 0, topP: 1, topK: 0 },
        maxTokens: 6,
        seed: 7,
        stopTokenIds: stopTokenIdsOf(tokenizer),
      };
      const overHttp = await served(server, engine).sample(request);
      const local = await new InProcessTokenSampler(model, 'raw_logprobs').sample(request);
      expect(overHttp.tokenIds).toEqual(local.tokenIds);
      expect(overHttp.tokenIds.length).toBeGreaterThan(0);
      overHttp.logprobs.forEach((logprob, index) => expect(logprob).toBeCloseTo(local.logprobs[index], 4));
      // Greedy rows are reported raw by both engines.
      expect(overHttp.distribution).toMatchObject({ kind: 'raw', temperature: 1, engine });
      const body = server.requests.at(-1)!.body;
      if (engine === 'vllm')
        expect(body).toMatchObject({
          prompt: promptIds,
          logprobs: 1,
          return_tokens_as_token_ids: true,
          seed: 7,
          top_k: -1,
        });
      else
        expect(body).toMatchObject({
          input_ids: promptIds,
          return_logprob: true,
          sampling_params: { sampling_seed: 7, max_new_tokens: 6 },
        });
    },
  );
});

/**
 * A model that writes given texts: after the last assistant header it continues the text of the
 * current viewer turn (one per user message), then ends the turn. Served by the test server's
 * greedy completions, so the sampled ids come over the real HTTP path.
 */
function scriptedScorer(texts: string[]): PromptScorer {
  const header = tokenizer.encode('<|im_start|>assistant\n');
  const userHeader = tokenizer.encode('<|im_start|>user');
  const endOfTurn = stopTokenIdsOf(tokenizer)[0];
  const scripts = texts.map((text) => [...tokenizer.encode(text), endOfTurn]);
  const lastIndexOf = (sequence: readonly number[], pattern: number[]): number => {
    for (let start = sequence.length - pattern.length; start >= 0; start--)
      if (pattern.every((id, offset) => sequence[start + offset] === id)) return start;
    return -1;
  };
  const count = (sequence: readonly number[], pattern: number[]): number => {
    let found = 0;
    for (let start = 0; start + pattern.length <= sequence.length; start++)
      if (pattern.every((id, offset) => sequence[start + offset] === id)) found++;
    return found;
  };
  return {
    decode: (tokenId) => tokenizer.decode([tokenId]),
    score(tokenIds) {
      const turn = count(tokenIds, userHeader) - 1;
      const written = tokenIds.length - (lastIndexOf(tokenIds, header) + header.length);
      const next = scripts[turn]?.[written] ?? endOfTurn;
      return { positions: tokenIds.map(() => null), next: [{ tokenId: next, logprob: -0.25 }] };
    },
  };
}

/** Plays viewer turns as the agent loop does: the model's reply, then the next viewer message. */
async function playTurns(sampler: TokenSampler, template: ChatTokenizer, followUps: string[]) {
  const episode = new TokenExactEpisode({
    sampler,
    tokenizer: template,
    parse: plainTextParser,
    sampling: { temperature: 0, topP: 1, topK: 0 },
    maxTokens: 48,
    seed: 11,
    now: new Date('2025-01-01T00:00:00Z'),
  });
  const messages: ChatMessage[] = [...conversation];
  const environmentTexts: string[] = [];
  for (let turn = 0; turn <= followUps.length; turn++) {
    const response = await episode.chat({ messages });
    messages.push(response.message);
    if (turn < followUps.length) messages.push({ role: 'user', content: followUps[turn] });
  }
  for (const followUp of followUps)
    environmentTexts.push(`\n<|im_start|>user\n${followUp}<|im_end|>\n<|im_start|>assistant\n`);
  return { episode, messages, view: episode.view(messages, []), environmentTexts };
}

describe('through hat serve (vLLM-compatible, in-process)', () => {
  let serve: ServeServer;
  let processed: ServeServer;
  beforeAll(async () => {
    serve = await startServeServer({ model: modelDir, servedModelName: 'policy', intraOpThreads: 1 });
    processed = await startServeServer({
      model: modelDir,
      servedModelName: 'policy',
      intraOpThreads: 1,
      logprobsMode: 'processed_logprobs',
    });
  });
  afterAll(async () => {
    await serve?.close();
    await processed?.close();
  });

  const sampler = (server: ServeServer, logprobsMode: 'raw_logprobs' | 'processed_logprobs') =>
    createTokenSampler({ adapter: 'vllm', baseUrl: server.baseUrl, model: 'policy', maxRetries: 0, logprobsMode });

  it.each([
    ['raw_logprobs', 'raw_logprobs', 'raw'],
    ['processed_logprobs', 'tempered_logprobs', 'tempered'],
  ] as const)(
    "same prompt and seed: sampled ids and %s logprobs equal the in-process decoder's",
    async (servedMode, localMode, kind) => {
      const promptIds = tokenizer.encode(tokenizer.render(conversation, { addGenerationPrompt: true }));
      for (const seed of [3, 1234]) {
        const request = {
          promptIds,
          sampling: { temperature: 0.8, topP: 1, topK: 0 },
          maxTokens: 12,
          seed,
          stopTokenIds: stopTokenIdsOf(tokenizer),
        };
        const overHttp = await sampler(servedMode === 'raw_logprobs' ? serve : processed, servedMode).sample(request);
        const local = await new InProcessTokenSampler(model, localMode).sample(request);
        expect(overHttp.tokenIds).toEqual(local.tokenIds);
        expect(overHttp.finishReason).toBe(local.finishReason);
        overHttp.logprobs.forEach((logprob, index) => expect(logprob).toBeCloseTo(local.logprobs[index], 4));
        expect(overHttp.distribution).toMatchObject({ kind, temperature: kind === 'raw' ? 1 : 0.8, engine: 'vllm' });
        expect(local.distribution).toMatchObject({ kind, engine: 'onnx' });
      }
    },
  );
});

describe('token-exact episodes', () => {
  it('grow one sequence: prompt + sampled ids + the environment ids as the template renders them, mask on sampled ids only', async () => {
    const server = await OpenAiTestServer.start({
      scorer: scriptedScorer(['The blue mug is in stock.', 'It costs 12 EUR.', 'Yes, it ships today.']),
    });
    servers.push(server);
    const { view, environmentTexts, messages } = await playTurns(served(server, 'vllm'), chatml, [
      'How much is it?',
      'Does it ship today?',
    ]);
    expect(view.turns).toHaveLength(3);
    const prompt = chatml.encode(chatml.render(conversation, { addGenerationPrompt: true }));
    expect(chatml.decode(prompt)).toBe(
      '<|im_start|>system\nYou are a live-room host.<|im_end|>\n<|im_start|>user\nIs the blue mug in stock?<|im_end|>\n<|im_start|>assistant\n',
    );
    const expected = [...prompt];
    const mask = prompt.map(() => 0);
    view.turns.forEach((turn, index) => {
      expect(turn.promptLength).toBe(expected.length);
      expected.push(...turn.sampledIds);
      mask.push(...turn.sampledIds.map(() => 1));
      if (index < environmentTexts.length) {
        const environment = tokenizer.encode(environmentTexts[index]);
        expected.push(...environment);
        mask.push(...environment.map(() => 0));
      }
    });
    expect(view.tokens).toEqual(expected);
    expect(view.lossMask).toEqual(mask);
    // The ids the server sampled, each turn ending with the end-of-turn id the model chose.
    expect(tokenizer.decode(view.turns[1].sampledIds)).toBe('It costs 12 EUR.<|im_end|>');
    expect(messages[4]).toEqual({ role: 'assistant', content: 'It costs 12 EUR.' });
    expect(view.rolloutLogprobs.filter((_, index) => mask[index] === 1).every((logprob) => logprob === -0.25)).toBe(
      true,
    );
    expect(view.rolloutLogprobs.filter((_, index) => mask[index] === 0).every((logprob) => logprob === 0)).toBe(true);
    // Each turn's prompt went over the wire as ids: the last request is the whole sequence so far.
    expect(server.requests.at(-1)!.body.prompt).toEqual(expected.slice(0, view.turns[2].promptLength));
    expect(view.drift).toEqual({ checked: true, drifted: false, firstDifference: null, tokens: 0 });
  });

  it('does not count the end-of-turn id a fresh render adds to a last turn cut by maxTokens as drift', async () => {
    const server = await OpenAiTestServer.start({ scorer: scriptedScorer(['Short answer.', 'word '.repeat(30)]) });
    servers.push(server);
    const { view } = await playTurns(served(server, 'vllm'), chatml, ['And more?']);
    expect(view.turns.map((turn) => turn.finishReason)).toEqual(['stop', 'length']);
    expect(view.drift).toEqual({ checked: true, drifted: false, firstDifference: null, tokens: 0 });
  });

  it('counts drift when the template re-renders an earlier turn differently (Qwen3 drops old reasoning)', async () => {
    const server = await OpenAiTestServer.start({
      scorer: scriptedScorer(['<think>\nCheck the stock.\n</think>\n\nIn stock.', 'It costs 12 EUR.']),
    });
    servers.push(server);
    const { view, messages } = await playTurns(served(server, 'vllm'), tokenizer, ['How much is it?']);
    expect(messages[2]).toEqual({ role: 'assistant', content: 'In stock.', reasoning_content: 'Check the stock.' });
    // As sampled, the reasoning stays in the training sequence; a fresh render drops it.
    expect(tokenizer.decode(view.tokens)).toContain('<think>\nCheck the stock.\n</think>');
    expect(view.drift.checked).toBe(true);
    expect(view.drift.drifted).toBe(true);
    expect(view.drift.firstDifference).toBe(view.turns[0].promptLength);
    expect(view.drift.tokens).toBeGreaterThan(0);
  });
});
