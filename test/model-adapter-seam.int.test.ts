/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { preflightRunConfig } from '../queues/runs/run-preflight';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { silentLogger } from '../shared/log/logger';
import { httpModelEndpoint } from '../shared/models/model-endpoint';
import { modelEndpointOf, registerModelAdapter, type ModelAdapterFactory } from '../shared/models/model-registry';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { OpenAiChatClient } from '../shared/models/openai/openai-chat-client';
import { openAiModelConfigSchema } from '../shared/models/openai/openai-model-config';
import { OnnxTokenScorer } from '../shared/models/scoring/onnx-token-scorer';
import { scoringShapeError } from '../shared/models/scoring/scoring-endpoint';
import { createOnnxPromptScorer } from '../shared/models/testing/onnx-prompt-scorer';
import {
  logprobsModeCheck,
  servedSamplerFieldsSchema,
  ServedTokenSampler,
  type TokenSamplingApi,
} from '../shared/models/token-exact/served-token-sampler';
import { stopTokenIdsOf } from '../shared/models/token-exact/token-exact-episode';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import type { DistillOutput } from '../workers/distill/distill-contract';
import { DistillModelCache } from '../workers/distill/distill-models';
import { distillStage } from '../workers/distill/processor';
import type { RolloutRecord } from '../workers/distill/rollout-records';
import { makeTinyDistillModels, tinyDistillConfig } from '../workers/distill/testing/tiny-distill-models';
import { replayStage } from '../workers/replay/processor';
import type { ReplayReport } from '../workers/replay/replay-report';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';
import { OpenAiTestServer } from './support/openai-test-server';

/**
 * The model-endpoint seam (docs/contributing/model-adapter.md): an HTTP adapter that only
 * registers itself, with an `endpoint` that describes its server, gets what the built-in
 * `openai` adapter gets: `hat run`'s preflight asks its server for the model, and replay scrapes
 * its server's Prometheus metrics. With a `tokenSampler` it is a token-exact student or policy
 * too: the distill stage samples through it. Nothing outside the registry entry names it.
 */

/** The how-to's example: llama.cpp's `llama-server` (OpenAI-compatible chat, `/v1/models`, `/metrics`). */
const llamaCppConfigSchema = openAiModelConfigSchema
  .omit({ adapter: true })
  .extend({
    adapter: z.literal('llamacpp'),
    /** llama-server's `cache_prompt`: reuse the KV cache of the longest matching prompt prefix. Default true. */
    cachePrompt: z.boolean().default(true),
  })
  .strict();
type LlamaCppConfig = z.infer<typeof llamaCppConfigSchema>;

/**
 * llama-server's `POST /completion` with a token-id prompt: the sampled ids (`return_tokens`) and
 * each one's logprob (`n_probs: 1`), from the softmax of the raw logits (no `post_sampling_probs`).
 */
const llamaCppSamplingApi: TokenSamplingApi = {
  engine: 'llamacpp',
  path: '/completion',
  defaultLogprobsMode: 'raw_logprobs',
  logprobsModes: ['raw_logprobs'],
  requestBody: (_model, request) => ({
    prompt: [...request.promptIds],
    n_predict: request.maxTokens,
    temperature: request.sampling.temperature,
    top_p: request.sampling.topP,
    top_k: request.sampling.topK,
    // Only the truncations the request names; no penalties.
    samplers: ['top_k', 'top_p', 'temperature'],
    repeat_penalty: 1,
    seed: request.seed,
    n_probs: 1,
    return_tokens: true,
    cache_prompt: true,
  }),
  sampledTokens: (body, url) => {
    const answer = body as { tokens?: unknown; completion_probabilities?: unknown; stop_type?: unknown };
    const tokens = answer.tokens;
    const probabilities = answer.completion_probabilities;
    if (!Array.isArray(tokens) || !Array.isArray(probabilities) || probabilities.length !== tokens.length)
      throw scoringShapeError(url, 'llamacpp', 'tokens and completion_probabilities must list every generated token');
    const logprobs = probabilities.map((entry: { id?: unknown; logprob?: unknown }, index) => {
      if (entry.id !== tokens[index] || typeof entry.logprob !== 'number')
        throw scoringShapeError(
          url,
          'llamacpp',
          `completion_probabilities[${index}] is not {id: ${tokens[index]}, logprob}`,
        );
      return entry.logprob;
    });
    return { tokenIds: tokens as number[], logprobs, finishReason: answer.stop_type === 'limit' ? 'length' : 'stop' };
  },
  // Each id decoded alone by the server's tokenizer: the check that it reads our ids as our text.
  probe: async (endpoint, _config, tokenIds, signal) => ({
    texts: await Promise.all(
      tokenIds.map(async (tokenId) => {
        const answer = (await endpoint.post('/detokenize', { tokens: [tokenId] }, signal)) as { content?: unknown };
        return typeof answer.content === 'string' ? answer.content : null;
      }),
    ),
  }),
};

const llamaCppSamplerSchema = servedSamplerFieldsSchema
  .extend({ adapter: z.literal('llamacpp') })
  .strict()
  .superRefine(logprobsModeCheck(llamaCppSamplingApi));
type LlamaCppSamplerConfig = z.infer<typeof llamaCppSamplerSchema>;

const llamaCppAdapter: ModelAdapterFactory<LlamaCppConfig, LlamaCppSamplerConfig> = {
  chat: {
    configSchema: llamaCppConfigSchema,
    create: ({ cachePrompt, ...config }, dependencies) =>
      new OpenAiChatClient(
        { ...config, adapter: 'openai', extraBody: { cache_prompt: cachePrompt, ...config.extraBody } },
        { ...dependencies, provider: 'llamacpp' },
      ),
  },
  tokenSampler: {
    configSchema: llamaCppSamplerSchema,
    create: (config, dependencies) => new ServedTokenSampler(llamaCppSamplingApi, config, dependencies),
  },
  endpoint: (config) => httpModelEndpoint('llamacpp', config),
};

describe('a model adapter registered by its registry entry alone', () => {
  let server: OpenAiTestServer;
  let directory: string;
  let store: FileArtifactStore;

  beforeAll(async () => {
    registerModelAdapter('llamacpp', llamaCppAdapter);
    server = await OpenAiTestServer.start({
      models: ['qwen3-0.6b-q8'],
      timing: { ttftMs: 2, tokenDelayMs: 1 },
      specDecode: { draftTokens: 3, acceptanceProbability: 0.5 },
    });
  });
  afterAll(async () => server.close());
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-adapter-seam-'));
    store = new FileArtifactStore(directory);
  });
  afterEach(async () => rm(directory, { recursive: true, force: true }));

  it('is described as an OpenAI-compatible server with its model list and metrics beside its base URL, serving token ids', () => {
    expect(modelEndpointOf({ adapter: 'llamacpp', baseUrl: server.baseUrl, model: 'qwen3-0.6b-q8' })).toMatchObject({
      kind: 'openai-compatible',
      adapter: 'llamacpp',
      model: 'qwen3-0.6b-q8',
      modelsUrl: `${server.url}/v1/models`,
      metricsUrl: `${server.url}/metrics`,
      // Its entry has a token sampler and no scorer: the description says so.
      servesTokenIds: true,
      scoring: false,
      simulated: false,
    });
  });

  it("gets preflight's model check: a model its server does not serve is refused at the config path, before anything runs", async () => {
    const config = (model: string) => ({
      stages: {
        replay: {
          inputs: ['s3://bucket/runs/x/collect/manifest.json'],
          target: { adapter: 'llamacpp', baseUrl: server.baseUrl, model },
        },
      },
    });
    const options = {
      openObject: (uri: string) => openArtifactObject(uri),
      environment: {},
      checkEndpoints: true,
      runOutputRoot: 's3://bucket/runs/x/',
    };
    const wrong = await preflightRunConfig(config('qwen3-8b'), options);
    expect(wrong.problems).toEqual([
      {
        path: ['stages', 'replay', 'target', 'model'],
        message: expect.stringMatching(
          /^the server at http:\/\/127\.0\.0\.1:\d+\/v1 does not serve "qwen3-8b" \(it lists: qwen3-0\.6b-q8\); fix model$/,
        ),
      },
    ]);
    const right = await preflightRunConfig(config('qwen3-0.6b-q8'), options);
    expect(right.problems).toEqual([]);

    const down = await preflightRunConfig(
      { stages: { replay: { target: { adapter: 'llamacpp', baseUrl: 'http://127.0.0.1:9/v1', model: 'm' } } } },
      options,
    );
    expect(down.problems.map((problem) => problem.message)).toEqual([
      expect.stringMatching(/^http:\/\/127\.0\.0\.1:9\/v1 does not answer GET \/v1\/models/),
    ]);
  });

  it("gets replay's metrics scrape and no retries: the report carries the server's spec-decode counters and the failed call, and the adapter's own request field went out", async () => {
    const inputs = [(await writeJsonl(store, 'sessions.jsonl.gz', syntheticSessions({ count: 4, toolMs: 1 }))).uri];
    const requestsBefore = server.requests.length;
    // Replay turns retries off for a target whose adapter takes maxRetries: this call fails and is counted.
    server.injectFault({ kind: 'status', status: 503, message: 'slots busy' }, 1);
    await runStageLocally(
      replayStage,
      {
        inputs,
        target: { adapter: 'llamacpp', baseUrl: server.baseUrl, model: 'qwen3-0.6b-q8' },
        load: { kind: 'closed', concurrency: 2 },
      },
      {
        store,
        openObject: (uri) => openArtifactObject(uri),
        logger: silentLogger(),
        seed: 'adapter-seam',
        clock: { now: () => Date.parse('2025-01-31T02:00:00Z') },
      },
    );
    const report = JSON.parse((await store.getBuffer('report.json')).toString('utf8')) as ReplayReport;
    expect(report.counts).toMatchObject({ sessions: 4, sessionsFailed: 1, callsFailed: 1 });
    expect(report.failures).toEqual([
      { code: 'MODEL_UNAVAILABLE', count: 1, example: expect.stringContaining('slots busy') },
    ]);
    expect(report.target.provider).toBe('llamacpp');
    expect(report.specDecode.available).toBe(true);
    expect(report.specDecode.drafts).toBeGreaterThan(0);
    expect(report.target.server?.specDecodeMetrics?.length).toBeGreaterThan(0);
    const sent = server.requests.slice(requestsBefore);
    const chats = sent.filter((request) => request.path === '/v1/chat/completions');
    expect(chats).toHaveLength(report.counts.calls);
    expect(chats.length).toBeGreaterThan(0);
    expect(chats.every((request) => (request.body as { cache_prompt?: unknown }).cache_prompt === true)).toBe(true);
  });

  it('gets token-exact sampling from its tokenSampler: the distill stage samples its student through /completion, checks its tokenizer through /detokenize, and refuses it as a teacher', async () => {
    const models = makeTinyDistillModels(join(directory, 'models'));
    const student = new OnnxTokenScorer(new OnnxModelClient({ modelDir: models.studentDir, intraOpThreads: 1 }), {
      modelDir: models.studentDir,
    });
    const tokenizer = await loadChatTokenizer({ modelDir: models.studentDir });
    const llamaServer = await OpenAiTestServer.start({
      models: ['student'],
      scorer: await createOnnxPromptScorer(student, models.studentDir),
      endOfGenerationIds: stopTokenIdsOf(tokenizer),
    });
    const cache = new DistillModelCache();
    const distill = async (name: string, overrides: Record<string, unknown>) => {
      const out = new FileArtifactStore(join(directory, name));
      const result = await runStageLocally(
        distillStage,
        tinyDistillConfig(models, {
          prompts: [{ kind: 'builtin', limit: 2 }],
          samplesPerPrompt: 1,
          // Greedy: the test server generates greedily, so both runs must draw the same ids.
          sampling: { temperature: 0, maxNewTokens: 6 },
          ...overrides,
        }),
        {
          store: out,
          openObject: (uri) => openArtifactObject(uri),
          logger: silentLogger(),
          services: { distillModels: cache },
        },
      );
      const records: RolloutRecord[] = [];
      for await (const record of readJsonl<RolloutRecord>(out, 'part-00000.jsonl.gz')) records.push(record);
      return { output: result.output as DistillOutput, records };
    };
    try {
      const served = await distill('llamacpp-student', {
        student: {
          adapter: 'llamacpp',
          baseUrl: llamaServer.baseUrl,
          model: 'student',
          maxRetries: 0,
          tokenizer: { modelDir: models.studentDir },
        },
      });
      const local = await distill('onnx-student', {});
      expect(served.output.studentEngine).toBe('llamacpp');
      expect(served.records.map((record) => record.student_engine)).toEqual(['llamacpp', 'llamacpp']);
      expect(served.records.map((record) => record.response_ids)).toEqual(
        local.records.map((record) => record.response_ids),
      );
      served.records.forEach((record, index) =>
        record.rollout_log_probs.forEach((logprob, position) =>
          expect(logprob).toBeCloseTo(local.records[index].rollout_log_probs[position], 4),
        ),
      );
      const completions = llamaServer.requests.filter((request) => request.path === '/completion');
      expect(completions).toHaveLength(2);
      expect(
        completions.every((request) => Array.isArray(request.body?.prompt) && request.body?.return_tokens === true),
      ).toBe(true);
      expect(llamaServer.requests.filter((request) => request.path === '/detokenize').length).toBeGreaterThan(30);

      // It has no scorer: a teacher position refuses it, naming the adapters that can score.
      await expect(
        distill('llamacpp-teacher', {
          teacher: { adapter: 'llamacpp', baseUrl: llamaServer.baseUrl, model: 'student' },
        }),
      ).rejects.toThrow(
        /teacher\.adapter: "llamacpp" has no token scorer \(it has a chat client, a token-exact sampler\); use one of: dummy, onnx, sglang, vllm/,
      );
    } finally {
      await cache.close();
      await student.close();
      await llamaServer.close();
    }
  });
});
