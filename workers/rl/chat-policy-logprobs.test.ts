/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeSmallHarness } from '../../shared/harness/testing/small-harness';
import { silentLogger } from '../../shared/log/logger';
import { makeDummyDecoder } from '../../shared/models/onnx/dummy-decoder';
import { startServeServer, type ServeServer } from '../../serve/serve-server';
import { OpenAiTestServer } from '../../shared/models/testing/openai-test-server';
import { taskCategories } from '../../shared/simulator/tasks/task-schema';
import type { ChatMessage } from '../../shared/trajectory/messages';
import type { ChatLogprobsMetadata } from './chat-policy-logprobs';
import type { EpisodeRecord } from './episode-records';
import { rlStage } from './processor';
import type { RlInputConfig } from './rl-contract';
import type { RlStats } from './rl-stats';

/**
 * rl policies on chat-completions endpoints: not token-exact, but every call asks for logprobs,
 * and the records keep them per assistant turn with the distribution they are of. Through real
 * local HTTP servers: `hat serve` (answers `logprobs: true` in vLLM's shape) and a test server
 * that refuses the field like an API without logprobs.
 */

let directory: string;
let modelDir: string;
let serve: ServeServer;
let harness: string;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hat-rl-chat-logprobs-'));
  modelDir = join(directory, 'policy');
  // The byte-level dummy tokenizer makes every prompt byte a token: the small harness keeps prefill short.
  harness = await writeSmallHarness(directory);
  makeDummyDecoder({ outDir: modelDir, tokenizer: 'bytes', hidden: 16, layers: 1, seed: 'rl-chat-logprobs' });
  serve = await startServeServer({ model: modelDir, servedModelName: 'policy', intraOpThreads: 1 });
}, 300_000);

afterAll(async () => {
  await serve?.close();
  await rm(directory, { recursive: true, force: true });
});

const singleTurn = Object.fromEntries(taskCategories.map((category) => [category, category === 'price' ? 1 : 0]));

function config(baseUrl: string, model: string): RlInputConfig {
  return {
    generate: { count: 2, seed: 'chat-logprobs', categoryWeights: singleTurn },
    groups: 1,
    groupSize: 2,
    maxTurns: 1,
    maxStepsPerTurn: 2,
    harness,
    canonicalShare: 1,
    policy: { adapter: 'openai', baseUrl, model, maxRetries: 0 },
    sampling: { temperature: 1, maxTokens: 6 },
    tokenizer: { modelDir },
  } as RlInputConfig;
}

async function run(input: RlInputConfig) {
  const store = new FileArtifactStore(await mkdtemp(join(directory, 'run-')));
  await runStageLocally(rlStage, input, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'unit',
    concurrency: 1,
  });
  const records: EpisodeRecord[] = [];
  for await (const record of readJsonl<EpisodeRecord>(store, 'part-00000.jsonl.gz')) records.push(record);
  const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as RlStats;
  return { records, stats };
}

describe('rl on a chat-completions endpoint: logprobs where the API gives them', () => {
  it("records hat serve's logprobs per assistant turn, with their distribution, token_exact false", async () => {
    const { records, stats } = await run(config(serve.baseUrl, 'policy'));
    expect(records).toHaveLength(2);
    for (const record of records) {
      expect(record.token_exact).toBe(false);
      const chat = record.metadata.chat_logprobs as ChatLogprobsMetadata;
      expect(chat.logprob_distribution).toEqual({ kind: 'raw', temperature: 1, topP: 1, topK: 0, engine: 'openai' });
      expect(chat.refused).toBeUndefined();
      const messages = JSON.parse(record.messages) as ChatMessage[];
      const assistants = messages.flatMap((message, index) => (message.role === 'assistant' ? [index] : []));
      expect(chat.turns.map((turn) => turn.message_index)).toEqual(assistants);
      expect(chat.missing_turns).toBe(0);
      for (const turn of chat.turns) {
        expect(turn.logprobs.length).toBeGreaterThan(0);
        expect(turn.tokens).toHaveLength(turn.logprobs.length);
        for (const logprob of turn.logprobs) expect(logprob).toBeLessThanOrEqual(0);
        // The bytes the server sent spell the tokens.
        expect(turn.bytes!.map((bytes) => Buffer.from(bytes).toString('utf8'))).toEqual(turn.tokens);
      }
    }
    const turns = records.reduce(
      (sum, record) => sum + (record.metadata.chat_logprobs as ChatLogprobsMetadata).turns.length,
      0,
    );
    expect(stats.policy).toMatchObject({ tokenExact: false, logprobDistribution: { kind: 'raw', engine: 'openai' } });
    expect(stats.chatLogprobs).toEqual({
      episodes: 2,
      turns,
      turnsWithLogprobs: turns,
      tokens: expect.any(Number),
      refusedEpisodes: 0,
    });
  }, 300_000);

  it('an API that refuses logprobs: asked again without them, records none, says so in stats', async () => {
    const server = await OpenAiTestServer.start({
      models: ['hosted'],
      responder: (request) =>
        request.body.logprobs === true
          ? { fault: { kind: 'status', status: 400, message: 'logprobs is not supported for this model' } }
          : { content: 'It is in stock.' },
    });
    try {
      // One episode at a time, so the refusal is met once before later calls.
      const { records, stats } = await run({ ...config(server.baseUrl, 'hosted'), episodeConcurrency: 1 });
      expect(records.map((record) => record.status)).toEqual(['ok', 'ok']);
      for (const record of records) {
        const chat = record.metadata.chat_logprobs as ChatLogprobsMetadata;
        expect(chat.turns).toEqual([]);
        expect(chat.missing_turns).toBeGreaterThan(0);
        expect(chat.refused).toMatch(/logprobs is not supported for this model/);
      }
      expect(stats.chatLogprobs).toMatchObject({ episodes: 2, turnsWithLogprobs: 0, tokens: 0, refusedEpisodes: 2 });
      // Once refused, later calls do not ask again.
      const asked = server.requests.filter(
        (request) => request.path === '/v1/chat/completions' && request.body.logprobs === true,
      );
      expect(asked).toHaveLength(1);
    } finally {
      await server.close();
    }
  }, 120_000);
});
