/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
// The rl stage against a Qwen3-vocabulary policy served over HTTP by hat serve, end to end. An
// integration test (formerly workers/rl/served-policy.test.ts): a real HTTP model server and a
// CPU decoder over 151k ids take 10-20 s, too long for `make test-unit`; the same paths with a
// bytes-vocabulary model stay in the unit tests (chat-policy-logprobs, served-student).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readParquet } from '../shared/artifacts/parquet-codec';
import { HatError } from '../shared/errors';
import { writeSmallHarness } from '../shared/harness/testing/small-harness';
import { silentLogger } from '../shared/log/logger';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { startServeServer, type ServeServer } from '../serve/serve-server';
import { taskCategories } from '../shared/simulator/tasks/task-schema';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import type { ChatTokenizer } from '../shared/text/chat-tokenizer';
import type { ChatMessage } from '../shared/trajectory/messages';
import type { EpisodeRecord } from '../workers/rl/episode-records';
import { rlStage } from '../workers/rl/processor';
import type { RlInputConfig } from '../workers/rl/rl-contract';
import type { RlStats } from '../workers/rl/rl-stats';

let directory: string;
let modelDir: string;
let harnessDir: string;
let serve: ServeServer;
let tokenizer: ChatTokenizer;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hat-rl-served-'));
  modelDir = join(directory, 'policy');
  // Qwen3's tokenizer and template. A CPU decoder computes logits over 151k ids for every prompt
  // position, so the harness is cut to two tools and one skill (a 1k-token prompt, not 5k:
  // shared/harness/testing/small-harness.ts).
  makeDummyDecoder({
    outDir: modelDir,
    tokenizer: 'qwen3',
    layers: 1,
    hidden: 8,
    heads: 2,
    kvHeads: 1,
    seed: 'rl-policy',
  });
  harnessDir = await writeSmallHarness(directory);
  tokenizer = await loadChatTokenizer({ modelDir });
  serve = await startServeServer({ model: modelDir, servedModelName: 'policy', intraOpThreads: 1 });
}, 300_000);

afterAll(async () => {
  await serve?.close();
  await rm(directory, { recursive: true, force: true });
});

/** Multi-turn tasks only: every episode plays three viewer turns. */
const multiTurnOnly = Object.fromEntries(
  taskCategories.map((category) => [category, category === 'multi_turn' ? 1 : 0]),
);

function config(overrides: Partial<RlInputConfig> = {}): RlInputConfig {
  return {
    generate: { count: 4, seed: 'served', categoryWeights: multiTurnOnly },
    groups: 1,
    groupSize: 2,
    maxTurns: 3,
    maxStepsPerTurn: 2,
    canonicalShare: 1,
    harness: harnessDir,
    policy: { adapter: 'vllm', baseUrl: serve.baseUrl, model: 'policy', dummyWeights: true, maxRetries: 0 },
    sampling: { temperature: 1, maxTokens: 12 },
    tokenizer: { modelDir },
    ...overrides,
  };
}

async function run(input: RlInputConfig) {
  const store = new FileArtifactStore(await mkdtemp(join(directory, 'run-')));
  const result = await runStageLocally(rlStage, input, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'unit',
    concurrency: 1,
  });
  const records: EpisodeRecord[] = [];
  for await (const record of readJsonl<EpisodeRecord>(store, 'part-00000.jsonl.gz')) records.push(record);
  return { store, result, records };
}

/** How Qwen3's template renders the messages after an assistant turn, through the next assistant header. */
function environmentText(messages: ChatMessage[]): string {
  return `\n${messages.map((message) => `<|im_start|>${message.role}\n${message.content}<|im_end|>\n`).join('')}<|im_start|>assistant\n`;
}

describe('rl with a policy served by hat serve, sampled token-exact', () => {
  it('records each 3-turn episode as prompt + sampled ids + environment ids, the loss mask on sampled ids only', async () => {
    const { store, records } = await run(config());
    expect(records).toHaveLength(2);
    for (const record of records) {
      expect(record.token_exact).toBe(true);
      const exact = record.metadata.token_exact as {
        turns: Array<{
          prompt_length: number;
          sampled_ids: number[];
          rollout_log_probs: number[];
          finish_reason: string;
        }>;
        logprob_distribution: unknown;
        drift: { checked: boolean };
      };
      const messages = JSON.parse(record.messages) as ChatMessage[];
      const assistants = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
      expect(exact.turns).toHaveLength(3);
      expect(assistants).toHaveLength(3);
      expect(exact.logprob_distribution).toEqual({ kind: 'raw', temperature: 1, topP: 1, topK: 0, engine: 'vllm' });

      // The first prompt is the template's rendering of the messages before the first assistant turn.
      const prompt = tokenizer.encode(
        tokenizer.render(messages.slice(0, assistants[0]), {
          tools: JSON.parse(record.tools),
          addGenerationPrompt: true,
          now: new Date('2025-01-01T00:00:00Z'),
        }),
      );
      expect(record.tokens.slice(0, record.prompt_length)).toEqual(prompt);
      expect(exact.turns[0].prompt_length).toBe(record.prompt_length);

      const mask = [...new Array<number>(record.prompt_length).fill(0), ...record.loss_mask];
      const logprobs = [...new Array<number>(record.prompt_length).fill(0), ...record.rollout_log_probs!];
      expect(mask).toHaveLength(record.tokens.length);
      exact.turns.forEach((turn, index) => {
        const end = turn.prompt_length + turn.sampled_ids.length;
        expect(record.tokens.slice(turn.prompt_length, end)).toEqual(turn.sampled_ids);
        expect(mask.slice(turn.prompt_length, end).every((bit) => bit === 1)).toBe(true);
        expect(logprobs.slice(turn.prompt_length, end)).toEqual(turn.rollout_log_probs);
        const next = exact.turns[index + 1];
        if (!next) {
          expect(end).toBe(record.tokens.length);
          return;
        }
        // Between turns: only environment ids, unmasked, exactly the template's rendering of what the environment said.
        expect(mask.slice(end, next.prompt_length).every((bit) => bit === 0)).toBe(true);
        const closing = turn.finish_reason === 'length' ? '<|im_end|>' : '';
        expect(tokenizer.decode(record.tokens.slice(end, next.prompt_length))).toBe(
          closing + environmentText(messages.slice(assistants[index] + 1, assistants[index + 1])),
        );
      });
      expect(mask.reduce((sum, bit) => sum + bit, 0)).toBe(
        exact.turns.reduce((sum, turn) => sum + turn.sampled_ids.length, 0),
      );
      expect(exact.drift.checked || typeof (exact.drift as { reason?: string }).reason === 'string').toBe(true);
    }
    // Different seeds, different samples.
    expect(records[0].tokens).not.toEqual(records[1].tokens);

    const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as RlStats;
    expect(stats.policy).toMatchObject({ provider: 'vllm', modelId: 'policy', simulated: true, tokenExact: true });
    expect(stats.tokenExact).toMatchObject({ episodes: 2, turns: 6 });
    expect((await store.getBuffer('report.html')).toString('utf8')).toContain('Token-exact sampling');
    const rows = await readParquet(store, 'part-00000.parquet');
    expect(rows.map((row) => row.token_exact)).toEqual([true, true]);
  }, 600_000);

  it('refuses, before any episode, a policy whose logprobs would not be of the sampling distribution', async () => {
    const failure = await run(config({ sampling: { temperature: 0.7, maxTokens: 12 } })).catch(
      (error: unknown) => error,
    );
    expect(HatError.isInstance(failure) && failure.code).toBe('LOGPROB_DISTRIBUTION_MISMATCH');
    expect((failure as HatError).exitCode).toBe(2);
  });

  it('samples an adapter that has a token sampler and no chat client in-process (`adapter: dummy`): the ids hat serve samples from the same weights', async () => {
    const served = await run(config());
    const shape = { tokenizer: 'qwen3', layers: 1, hidden: 8, heads: 2, kvHeads: 1, seed: 'rl-policy' };
    const local = await run(
      config({
        policy: { adapter: 'dummy', ...shape, modelId: 'policy', intraOpThreads: 1 },
        modelCacheDir: join(directory, 'models'),
      }),
    );
    expect(local.records.map((record) => record.token_exact)).toEqual([true, true]);
    expect(local.records.map((record) => record.tokens)).toEqual(served.records.map((record) => record.tokens));
    const stats = JSON.parse((await local.store.getBuffer('stats.json')).toString('utf8')) as RlStats;
    expect(stats.policy).toMatchObject({ provider: 'onnx', modelId: 'policy', simulated: true, tokenExact: true });
    // Its own tokenizer must be rl.tokenizer: a model of another vocabulary is refused before any episode.
    const other = await run(
      config({ policy: { adapter: 'dummy', ...shape, tokenizer: 'bytes' }, modelCacheDir: join(directory, 'models') }),
    ).catch((error: unknown) => error);
    expect(HatError.isInstance(other) && other.code).toBe('TOKENIZER_MISMATCH');
  }, 600_000);
});
