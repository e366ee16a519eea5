import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { preflightRunConfig } from '../queues/runs/run-preflight';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { silentLogger } from '../shared/log/logger';
import { httpModelEndpoint } from '../shared/models/model-endpoint';
import { modelEndpointOf, registerModelAdapter, type ModelAdapterFactory } from '../shared/models/model-registry';
import { OpenAiChatClient } from '../shared/models/openai/openai-chat-client';
import { openAiModelConfigSchema } from '../shared/models/openai/openai-model-config';
import { replayStage } from '../workers/replay/processor';
import type { ReplayReport } from '../workers/replay/replay-report';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';
import { OpenAiTestServer } from './support/openai-test-server';

/**
 * The model-endpoint seam (docs/contributing/model-adapter.md): an HTTP adapter that only
 * registers itself, with an `endpoint` that describes its server, gets what the built-in
 * `openai` adapter gets: `hat run`'s preflight asks its server for the model, and replay scrapes
 * its server's Prometheus metrics. Nothing outside the registry entry names it.
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

const llamaCppAdapter: ModelAdapterFactory<LlamaCppConfig> = {
  configSchema: llamaCppConfigSchema,
  create: ({ cachePrompt, ...config }, dependencies) =>
    new OpenAiChatClient(
      { ...config, adapter: 'openai', extraBody: { cache_prompt: cachePrompt, ...config.extraBody } },
      { ...dependencies, provider: 'llamacpp' },
    ),
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

  it('is described as an OpenAI-compatible server with its model list and metrics beside its base URL', () => {
    expect(modelEndpointOf({ adapter: 'llamacpp', baseUrl: server.baseUrl, model: 'qwen3-0.6b-q8' })).toMatchObject({
      kind: 'openai-compatible',
      adapter: 'llamacpp',
      model: 'qwen3-0.6b-q8',
      modelsUrl: `${server.url}/v1/models`,
      metricsUrl: `${server.url}/metrics`,
      servesTokenIds: false,
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
});
