import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveLatestInputs } from '../../queues/runs/latest-inputs';
import { pointerLocationOf, writePromotion } from '../../queues/runs/promoted-checkpoint';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { exitCodeOf } from '../../shared/errors';
import { silentLogger } from '../../shared/log/logger';
import { OpenAiTestServer, echoResponder, type RecordedRequest } from '../../shared/models/testing/openai-test-server';
import type { EvalInputConfig, EvalOutput } from './eval-contract';
import type { EvalScores } from './eval-scores';
import { summarizeEval } from './eval-summary';
import { evalStage } from './processor';

/**
 * Issue #33, item 5: served models' answers are cached in the artifact store by endpoint identity
 * and exact request, so re-evaluating an unchanged model costs no requests; counted on the local
 * OpenAI-compatible test server.
 */

const directories: string[] = [];
let server: OpenAiTestServer;
/** Prompts whose next request fails (once each). */
const failOnce = new Set<string>();

beforeAll(async () => {
  server = await OpenAiTestServer.start({
    models: ['model-a', 'model-b'],
    responder: (request) => {
      const prompt = lastUser(request);
      if (failOnce.delete(prompt)) return { fault: { kind: 'status', status: 500, message: 'overloaded' } };
      return echoResponder(request);
    },
  });
});
afterAll(async () => {
  await server.close();
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

function lastUser(request: RecordedRequest): string {
  const messages = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const last = [...messages].reverse().find((message) => message.role === 'user');
  return typeof last?.content === 'string' ? last.content : '';
}

/** Chat requests the server got since `from`, by model id. */
function requestsSince(from: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const request of server.requests.slice(from))
    if (request.path.endsWith('/chat/completions')) {
      const model = String(request.body?.model);
      counts[model] = (counts[model] ?? 0) + 1;
    }
  return counts;
}

async function workspace(): Promise<{ store: FileArtifactStore; prompts: string }> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-eval-cache-'));
  directories.push(directory);
  const prompts = join(directory, 'prompts.jsonl');
  await writeFile(
    prompts,
    ['one', 'two', 'three', 'four']
      .map((id) =>
        JSON.stringify({
          id,
          prompt: `Prompt ${id}: answer without commas`,
          checks: [{ instruction: 'punctuation:no_comma' }],
        }),
      )
      .join('\n') + '\n',
  );
  return { store: new FileArtifactStore(directory), prompts };
}

const served = (label: string, model: string, extra: Record<string, unknown> = {}) => ({
  label,
  model: { adapter: 'openai', baseUrl: server.baseUrl, model, maxRetries: 0, ...extra },
});

/** One eval run into `<run>/` of the store (each run its own output, one artifact root, as nightly runs). */
async function runEval(store: FileArtifactStore, run: string, config: EvalInputConfig) {
  const from = server.requests.length;
  const result = await runStageLocally(evalStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'cache',
    outputPrefix: `runs/${run}/eval`,
    concurrency: 1,
  });
  const scores = JSON.parse((await store.getBuffer(`runs/${run}/eval/scores.json`)).toString('utf8')) as EvalScores;
  return { output: result.output as EvalOutput, scores, requests: requestsSince(from) };
}

describe('eval response cache', () => {
  it('a second eval of the same model makes 0 requests, with the same scores; hits and misses in scores.json and the report', async () => {
    const { store, prompts } = await workspace();
    const config: EvalInputConfig = {
      models: [served('a', 'model-a')],
      suites: { custom: { prompts }, live_stream_qa: { size: 2, categories: ['price'] } },
      bootstrapSamples: 100,
    };
    const first = await runEval(store, 'night-1', config);
    const asked = first.requests['model-a'] ?? 0;
    expect(asked).toBeGreaterThan(4); // 4 prompts and the turns of 2 episodes
    expect(first.scores.cache).toEqual({
      prefix: 'cache/eval-responses/',
      models: { a: { hits: 0, misses: asked } },
    });
    const second = await runEval(store, 'night-2', config);
    expect(second.requests).toEqual({});
    expect(second.scores.cache?.models).toEqual({ a: { hits: asked, misses: 0 } });
    expect(second.scores.leaderboard).toEqual(first.scores.leaderboard);
    // The run report's eval figures say it too.
    expect(second.output.cache).toEqual({ hits: asked, misses: 0 });
    expect(summarizeEval(second.output).figures).toContainEqual({
      label: 'response cache',
      value: `${asked} of ${asked} model calls answered from the cache (100.0%); 0 requests sent`,
    });
    const report = (await store.getBuffer('runs/night-2/eval/report.html')).toString('utf8');
    expect(report).toContain(
      `${asked} of ${asked} model calls answered from cache/eval-responses/ (hit rate 100.0%); 0 requests sent`,
    );
  }, 60_000);

  it('adding a model asks only that model; unrelated config changes invalidate nothing; a new checkpoint or sampling asks again', async () => {
    const { store, prompts } = await workspace();
    const base: EvalInputConfig = {
      models: [served('a', 'model-a')],
      suites: { custom: { prompts } },
      bootstrapSamples: 100,
    };
    expect((await runEval(store, 'n1', base)).requests).toEqual({ 'model-a': 4 });
    const added = await runEval(store, 'n2', { ...base, models: [served('a', 'model-a'), served('b', 'model-b')] });
    expect(added.requests).toEqual({ 'model-b': 4 });
    expect(added.scores.cache?.models).toEqual({ a: { hits: 4, misses: 0 }, b: { hits: 0, misses: 4 } });
    // Bootstrap, parts, concurrency, compare, the client's timeout and retries: none is part of a request.
    const unrelated = await runEval(store, 'n3', {
      ...base,
      models: [served('a', 'model-a', { timeoutMs: 30_000, maxRetries: 2, concurrency: 3 }), served('b', 'model-b')],
      bootstrapSamples: 200,
      itemsPerPart: 1,
      itemConcurrency: 2,
      compare: [['b', 'a']],
    });
    expect(unrelated.requests).toEqual({});
    // What the request or the weights are does invalidate: another sampling setting, a checkpoint named.
    const changed = await runEval(store, 'n4', {
      ...base,
      models: [
        { ...served('a', 'model-a'), sampling: { temperature: 0.7 } },
        { ...served('b', 'model-b'), checkpoint: 'runs/night-2/rl' },
      ],
    });
    expect(changed.requests).toEqual({ 'model-a': 4, 'model-b': 4 });
    // Off: every item asked.
    const off = await runEval(store, 'n5', { ...base, cache: { enabled: false } });
    expect(off.requests).toEqual({ 'model-a': 4 });
    expect(off.scores.cache).toBeUndefined();
  }, 60_000);

  it('a part that dies keeps the items it finished: its retry asks only the item that failed', async () => {
    const { store, prompts } = await workspace();
    failOnce.add('Prompt three: answer without commas');
    const { requests, scores, output } = await runEval(store, 'n1', {
      models: [served('a', 'model-a')],
      suites: { custom: { prompts } },
      // Any endpoint error fails the part (transient): the local runner retries it.
      maxModelErrorShare: 0,
      bootstrapSamples: 100,
    });
    // 4 answers and the failed request; without the cache the retry would ask all 4 again (8 + 1).
    expect(requests).toEqual({ 'model-a': 5 });
    expect(output.items).toBe(4);
    expect(scores.cache?.models).toEqual({ a: { hits: 3, misses: 1 } });
  }, 60_000);

  it('a cache prefix in the config puts the answers there, shared by outputs in other roots', async () => {
    const first = await workspace();
    const second = await workspace();
    const prefix = `${first.store.uriOf('shared-cache')}/`;
    const config = (prompts: string): EvalInputConfig => ({
      models: [served('a', 'model-a')],
      suites: { custom: { prompts } },
      cache: { prefix },
      bootstrapSamples: 100,
    });
    expect((await runEval(first.store, 'n1', config(first.prompts))).requests).toEqual({ 'model-a': 4 });
    const elsewhere = await runEval(second.store, 'n1', config(second.prompts));
    expect(elsewhere.requests).toEqual({});
    expect(elsewhere.scores.cache?.prefix).toBe(prefix);
    const stored = [];
    for await (const object of first.store.list('shared-cache/')) stored.push(object.key);
    expect(stored).toHaveLength(4);
  }, 60_000);
});

describe('a bad cache prefix', () => {
  it('is refused at validation (exit 2, field named, what to give), before any request', async () => {
    const { store, prompts } = await workspace();
    const from = server.requests.length;
    const error = await runEval(store, 'n1', {
      models: [served('a', 'model-a')],
      suites: { custom: { prompts } },
      cache: { prefix: 'http://cache.example/answers/' },
    }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(exitCodeOf(error)).toBe(2);
    expect((error as Error).message).toMatch(
      /cache\.prefix.*must be a folder URI such as s3:\/\/bucket\/cache\/eval-responses\//,
    );
    expect(requestsSince(from)).toEqual({});
  });
});

describe('the promoted checkpoint as a cache identity', () => {
  it('`latestCheckpoint` with field checkpoint resolves to one string per promotion: the same until the pointer moves', async () => {
    const { store } = await workspace();
    const root = store.uriOf('root');
    const openObject = (uri: string) => openArtifactObject(uri);
    const identity = async () =>
      (
        await resolveLatestInputs(
          { stages: { eval: { checkpoint: { latestCheckpoint: root, field: 'checkpoint' } } } },
          { openObject, now: new Date() },
        )
      ).resolved.map((input) => input.resolved);
    const promote = (runId: string, promotedAt: string) =>
      writePromotion(pointerLocationOf(root, openObject), {
        schemaVersion: 1,
        endpoint: 'http://serve-rl:8000/v1',
        model: 'hat-rl',
        label: 'new',
        runId,
        promotedBy: 'gate',
        promotedAt,
        reasons: [],
      });
    await promote('night-1', '2025-01-30T19:00:00.000Z');
    const first = await identity();
    expect(first).toEqual(['promoted/night-1/new@2025-01-30T19:00:00.000Z']);
    expect(await identity()).toEqual(first);
    // The same endpoint and model name, new weights: another identity, so no answer of the old ones is reused.
    await promote('night-2', '2025-01-31T19:00:00.000Z');
    expect(await identity()).toEqual(['promoted/night-2/new@2025-01-31T19:00:00.000Z']);
  });
});
