import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { enqueueRun } from '../queues/runs/flows';
import { watchRun } from '../queues/runs/run-control';
import { planRun } from '../queues/runs/run-config';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readManifest } from '../shared/artifacts/manifest';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import type { ChatRequest, ChatResponse, ModelClient } from '../shared/models/model-client';
import { createModelClient } from '../shared/models/model-registry';
import { runEpisode } from '../shared/simulator/agent-loop';
import { scriptedServiceKeys } from '../shared/simulator/policies/scripted-adapter';
import type { ChatMessage } from '../shared/trajectory/messages';
import { evalInputSchema, type EvalInputConfig } from '../workers/eval/eval-contract';
import { buildSuiteItems, rebuildVariant, type EvalItem } from '../workers/eval/eval-items';
import type { EvalResult } from '../workers/eval/eval-part';
import type { EvalScores } from '../workers/eval/eval-scores';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer, type ScriptedChatResponse } from './support/openai-test-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * The eval stage against a local OpenAI-compatible server that answers from a fixed table
 * (conversation → response), built before the stage runs:
 * - episodes (live_stream_qa, harness_variant_qa): the scripted expert's answers, recorded for
 *   the items a model "knows" (each recorded episode checked to score exactly 1 here); any other
 *   conversation gets HTTP 400, so the item scores 0;
 * - single prompts (ifeval, custom): hand-written responses that follow or break each instruction;
 * - the judge: a rating per reply text.
 * So every score below is a count over the table, computed by hand, and the stage must reproduce
 * it exactly, through queues and through `hat stage`.
 */

type Table = Map<string, ScriptedChatResponse>;

/** A conversation as the server sees it, without ids and tool results (the expert's next step depends on neither here). */
function conversationKey(model: string, messages: ChatMessage[]): string {
  return JSON.stringify([
    model,
    messages.map((message) => [
      message.role,
      message.role === 'tool' ? '' : (message.content ?? ''),
      message.role === 'assistant'
        ? (message.tool_calls ?? []).map((call) => [call.function.name, call.function.arguments])
        : [],
    ]),
  ]);
}

/** Plays the expert on one item, recording every step into the table under `model`; returns the episode's reward. */
async function recordExpert(table: Table, model: string, item: Extract<EvalItem, { task: unknown }>): Promise<number> {
  const canonical = await loadHarness(sampleHarnessDirectory());
  const harness =
    item.suite === 'harness_variant_qa' && item.harness.kind === 'variant'
      ? rebuildVariant(canonical, item.harness.seed ?? '', item.harness.weights ?? {}).harness
      : canonical;
  const expert = createModelClient(
    { adapter: 'scripted', policy: 'expert' },
    { services: { [scriptedServiceKeys.tasks]: [item.task], [scriptedServiceKeys.harnesses]: [harness] } },
  );
  const recording: ModelClient = {
    specificationVersion: 'v1',
    provider: 'recording',
    modelId: model,
    async chat(request: ChatRequest): Promise<ChatResponse> {
      const response = await expert.chat(request);
      const calls = response.message.tool_calls ?? [];
      table.set(conversationKey(model, request.messages), {
        ...(response.message.content ? { content: response.message.content } : {}),
        ...(calls.length > 0
          ? {
              toolCalls: calls.map((call) => ({
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
              })),
            }
          : {}),
      });
      return response;
    },
  };
  const trajectory = await runEpisode({ policy: recording, harness, task: item.task, maxSteps: 6 });
  return trajectory.reward.total;
}

// IFEval prompts with one instruction each (keys of the shipped input_data.jsonl).
const noComma = 1001;
const lowercase = 1051;
const capitals = 1566;
const english = {
  noCommas:
    'I will spend the first two days in Tokyo visiting the old temples.\nThen I will take the fast train to Kyoto and walk through the gardens.\nFinally I will rest in Osaka and enjoy the street food there.',
  commas:
    'Day one: Tokyo, Shibuya, and the fish market.\nDay two: Kyoto, the temples, and a tea house.\nDay three: Osaka, the castle, and street food.',
  lower:
    'dear sam,\nplease remember to go and vote next tuesday because every single vote matters in our town.\nsee you at the polling station in the morning.',
  titleCase:
    'Dear Sam,\nPlease Remember To Go And Vote Next Tuesday Because Every Vote Matters.\nSee You At The Polling Station In The Morning.',
  capitals:
    'I REGRET THE SUMMER WE LOST AND THE WORDS I NEVER SAID.\nTHIS SONG IS ABOUT LEARNING FROM THOSE REGRETS AND MOVING ON.\nTHE CHORUS REPEATS THE PROMISE TO DO BETTER NEXT TIME.',
};

const customPrompts = [
  {
    id: 'no-commas',
    prompt: 'Describe our store in three lines without commas.',
    checks: [{ instruction: 'punctuation:no_comma' }],
  },
  {
    id: 'lowercase',
    prompt: 'Write a short thank-you note in lowercase English.',
    checks: [{ instruction: 'change_case:english_lowercase' }],
  },
  {
    id: 'warm-pitch',
    prompt: 'A viewer says the jacket looks nice but expensive. Reply.',
    rubric: 'Acknowledges the viewer and gives one honest reason the price is fair.',
  },
];
const pitch = {
  good: 'Thank you! It is lined with down and comes with a two-year warranty, so it lasts for years.',
  weak: 'ok.',
};

const prompts: Record<string, Record<string, string>> = {
  good: {
    [noComma]: english.noCommas,
    [lowercase]: english.lower,
    [capitals]: english.lower,
    'no-commas': english.noCommas,
    lowercase: english.lower,
    'warm-pitch': pitch.good,
  },
  weak: {
    [noComma]: english.commas,
    [lowercase]: english.titleCase,
    [capitals]: english.capitals,
    'no-commas': english.commas,
    lowercase: english.lower,
    'warm-pitch': pitch.weak,
  },
};
/** The judge's rating (1-5) of each reply it may see. */
const ratings = new Map<string, number>([
  [english.noCommas, 4],
  [english.commas, 3],
  [english.lower, 5],
  [pitch.good, 5],
  [pitch.weak, 1],
]);

interface Fixture {
  server: OpenAiTestServer;
  directory: string;
  customFile: string;
  config: EvalInputConfig;
  /** Which live_stream_qa / harness_variant_qa items each model answers. */
  answered: Record<string, Set<string>>;
  items: EvalItem[];
}

async function startFixture(): Promise<Fixture> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-eval-int-'));
  const customFile = join(directory, 'custom.jsonl');
  await writeFile(customFile, customPrompts.map((prompt) => JSON.stringify(prompt)).join('\n') + '\n');
  const table: Table = new Map();
  const base: EvalInputConfig = {
    models: [],
    suites: {
      live_stream_qa: { size: 11, seed: 'int-lsqa' },
      harness_variant_qa: { size: 2, seed: 'int-hvqa', variantsPerTask: 1, heldOutFamilies: ['tool_schemas'] },
      ifeval: { keys: [noComma, lowercase, capitals] },
      custom: { prompts: customFile },
    },
    judge: { model: { adapter: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'judge' }, suites: ['custom'] },
  };
  const canonical = await loadHarness(sampleHarnessDirectory());
  const suites = await buildSuiteItems(
    evalInputSchema.parse({ ...base, models: [{ label: 'x', model: { adapter: 'scripted' } }] }),
    canonical,
    { variantHashes: new Set(), variantDirs: new Map(), variantFamilies: new Map() },
    (uri) => openArtifactObject(uri),
  );
  const items = suites.flatMap((suite) => suite.items);
  const live = items.filter(
    (item): item is Extract<EvalItem, { suite: 'live_stream_qa' }> => item.suite === 'live_stream_qa',
  );
  const variants = items.filter(
    (item): item is Extract<EvalItem, { suite: 'harness_variant_qa' }> => item.suite === 'harness_variant_qa',
  );
  const canonicalOf = (index: number) => variants.filter((item) => item.harness.kind === 'canonical')[index];
  const plainVariantOf = (index: number) =>
    variants.filter((item) => item.harness.kind === 'variant' && !item.harness.heldOutOperator)[index];
  const heldOutOf = (index: number) =>
    variants.filter((item) => item.harness.kind === 'variant' && item.harness.heldOutOperator)[index];
  // good knows 8 of the 11 live tasks, both canonical tasks and one plain variant; weak knows 4 live tasks and one canonical task.
  const answered: Record<string, Set<string>> = {
    good: new Set([
      ...live.slice(0, 8).map((item) => item.id),
      canonicalOf(0).id,
      canonicalOf(1).id,
      plainVariantOf(0).id,
    ]),
    weak: new Set([...live.slice(3, 7).map((item) => item.id), canonicalOf(0).id]),
  };
  for (const [model, ids] of Object.entries(answered)) {
    for (const item of [...live, ...variants].filter((entry) => ids.has(entry.id))) {
      const reward = await recordExpert(table, model, item);
      if (reward !== 1)
        throw new Error(`fixture: the expert scores ${reward} on ${item.id}; the hand-computed scores assume 1`);
    }
  }
  // The held-out-operator variants exist and nobody knows them.
  expect(heldOutOf(0).harness).toMatchObject({ kind: 'variant', families: ['tool_schemas'] });

  const server = await OpenAiTestServer.start({
    models: ['good', 'weak', 'judge'],
    responder: (request) => {
      const model = request.body.model as string;
      const messages = request.body.messages as ChatMessage[];
      if (model === 'judge') {
        const user = messages.find((message) => message.role === 'user')?.content ?? '';
        const reply = user.slice(user.indexOf('Reply to rate:\n') + 'Reply to rate:\n'.length);
        return { content: `{"score": ${ratings.get(reply) ?? 3}, "reason": "table"}` };
      }
      if (messages.length === 1 && messages[0].role === 'user') {
        const prompt = messages[0].content;
        const key = Object.keys(prompts[model] ?? {}).find((name) =>
          /^\d+$/.test(name)
            ? prompt === ifevalPrompt(items, Number(name))
            : prompt === customPrompts.find((entry) => entry.id === name)?.prompt,
        );
        if (key !== undefined) return { content: prompts[model][key] };
      }
      const answer = table.get(conversationKey(model, messages));
      return answer ?? { fault: { kind: 'status', status: 400, message: 'not in the table' } };
    },
  });
  const config: EvalInputConfig = {
    ...base,
    models: [
      { label: 'good', model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'good', maxRetries: 0 } },
      { label: 'weak', model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'weak', maxRetries: 0 } },
    ],
    judge: { model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'judge', maxRetries: 0 }, suites: ['custom'] },
    maxModelErrorShare: 1,
    itemsPerPart: 4,
    bootstrapSamples: 200,
  };
  return { server, directory, customFile, config, answered, items };
}

function ifevalPrompt(items: EvalItem[], key: number): string | undefined {
  const item = items.find((entry) => entry.suite === 'ifeval' && entry.key === key);
  return item?.suite === 'ifeval' ? item.prompt : undefined;
}

/** The scores the table implies, computed by hand. */
function expectHandComputedScores(scores: EvalScores): void {
  const good = scores.scores.good;
  const weak = scores.scores.weak;
  // Live-Stream QA: 11 tasks (one per category); good answers 8, weak 4, each answered one scores 100.
  expect(good.metrics.live_stream_qa).toBeCloseTo(800 / 11, 10);
  expect(weak.metrics.live_stream_qa).toBeCloseTo(400 / 11, 10);
  expect(
    Object.values(good.live_stream_qa!.byCategory)
      .map((cell) => cell.score)
      .sort((a, b) => a - b),
  ).toEqual([0, 0, 0, 100, 100, 100, 100, 100, 100, 100, 100]);
  // Harness-Variant QA: 2 tasks × (canonical, 1 variant, 1 held-out-operator variant).
  expect(good.harness_variant_qa).toMatchObject({
    canonical: { score: 100, items: 2 },
    variant: { score: 25, items: 4 },
    gap: { score: 75 },
    heldOutOperators: { score: 0, items: 2 },
    heldOutVariantShare: 1,
  });
  expect(weak.harness_variant_qa).toMatchObject({
    canonical: { score: 50 },
    variant: { score: 0 },
    gap: { score: 50 },
  });
  // IFEval: good follows 2 of 3 prompts (one instruction each), weak 1 of 3; no loose variant rescues a broken one.
  expect(good.ifeval).toMatchObject({
    count: 3,
    promptStrict: 200 / 3,
    instructionStrict: 200 / 3,
    promptLoose: 200 / 3,
    instructionLoose: 200 / 3,
  });
  expect(weak.ifeval).toMatchObject({
    count: 3,
    promptStrict: 100 / 3,
    instructionStrict: 100 / 3,
    promptLoose: 100 / 3,
    instructionLoose: 100 / 3,
  });
  // Custom: two rule-checked prompts (good passes both, weak one); the third is judged only.
  expect(good.custom!.overall).toMatchObject({ score: 100, items: 2 });
  expect(weak.custom!.overall).toMatchObject({ score: 50, items: 2 });
  // Judge (apart from rules): ratings 1-5 → 0-100 over the three custom replies.
  expect(good.metrics['judge.custom']).toBeCloseTo((75 + 100 + 100) / 3, 10);
  expect(weak.metrics['judge.custom']).toBeCloseTo((50 + 100 + 0) / 3, 10);
  expect(scores.judge).toMatchObject({ model: 'judge', rubricVersion: 'hat-judge-v1', missing: 0 });
  expect(scores.judge!.rubricHash).toMatch(/^[0-9a-f]{64}$/);
  // The paired comparison good − weak on Live-Stream QA: items good knows and weak does not, minus the reverse.
  const live = scores.comparisons.find((comparison) => comparison.suite === 'live_stream_qa')!;
  expect(live).toMatchObject({ a: 'good', b: 'weak' });
  expect(live.difference.score).toBeCloseTo(400 / 11, 10);
  expect(live.difference.low).toBeLessThanOrEqual(live.difference.score);
  expect(scores.leaderboard.good.ifeval.score).toBeCloseTo(200 / 3, 10);
}

/** scores.json without what legitimately differs between two runs of the same config (run id, endpoints). */
function comparable(scores: EvalScores): unknown {
  return {
    leaderboard: scores.leaderboard,
    scores: JSON.parse(JSON.stringify(scores.scores, (key, value) => (key === 'meanLatencyMs' ? undefined : value))),
    comparisons: scores.comparisons,
  };
}

describe('eval stage against a table-driven OpenAI-compatible server', () => {
  let fixture: Fixture;
  let kit: QueueTestKit;
  beforeAll(async () => {
    fixture = await startFixture();
  }, 120_000);
  afterAll(async () => {
    await fixture?.server.close();
    await rm(fixture.directory, { recursive: true, force: true });
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  it('reproduces the hand-computed scores of every suite through queues and through `hat stage`, identically', async () => {
    await kit.startWorkers({ queues: ['eval', 'runs'] });
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'eval-q', seed: 'int', stages: { eval: fixture.config } },
        { env: kit.env, now: new Date('2025-03-01T00:00:00Z') },
      ),
    );
    const status = await watchRun(kit.context, 'eval-q', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    // 2 models × (11 live + 6 variant + 3 ifeval + 3 custom items) in parts of at most 4 items.
    expect(status.stages).toEqual([
      expect.objectContaining({ name: 'eval', state: 'completed', partsDone: 14, partsTotal: 14 }),
    ]);
    const queued = JSON.parse(
      (await kit.store.getBuffer('runs/eval-q/eval/scores.json')).toString('utf8'),
    ) as EvalScores;
    expectHandComputedScores(queued);

    // Per-item results: prompt, response, each check, latency, usage.
    const manifest = await readManifest(kit.store, 'runs/eval-q/eval/manifest.json');
    const results: EvalResult[] = [];
    for (const object of manifest.objects.filter((entry) => entry.kind === 'results'))
      for await (const record of readJsonl<EvalResult>(kit.store, object.key)) results.push(record);
    expect(results).toHaveLength(46);
    const comma = results.find((result) => result.model === 'weak' && result.itemId === `ifeval-${noComma}`)!;
    expect(comma).toMatchObject({
      response: english.commas,
      score: 0,
      checks: [{ name: 'punctuation:no_comma', strict: false, loose: false }],
      followedStrict: false,
    });
    expect(comma.usage.completionTokens).toBeGreaterThan(0);
    const unknown = results.find(
      (result) =>
        result.model === 'good' && result.suite === 'live_stream_qa' && !fixture.answered.good.has(result.itemId),
    )!;
    expect(unknown).toMatchObject({ status: 'model_error', score: 0 });
    // The run report shows the leaderboard.
    const runReport = (await kit.store.getBuffer('runs/eval-q/run-report.html')).toString('utf8');
    expect(runReport).toContain('leaderboard: good');
    expect(runReport).toContain('LSQA 72.7');
    const html = (await kit.store.getBuffer('runs/eval-q/eval/report.html')).toString('utf8');
    expect(html).toContain('Judge scores (apart from rule scores)');

    const out = pathToFileURL(join(fixture.directory, 'stage-out')).href;
    const configFile = join(fixture.directory, 'eval.yaml');
    await writeFile(configFile, JSON.stringify(fixture.config));
    const cli = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'stage',
      'eval',
      '--config',
      configFile,
      '--out',
      out,
      '--seed',
      'int',
    );
    // No error printed; the figures name each model's error rate (the table answers some items with HTTP 400).
    expect(cli.stderr).not.toMatch(/error(?! rate)/i);
    expect(cli.stderr).toContain('failed items: good: 6 of 23 (error rate 26.1%)');
    expect(cli.code).toBe(0);
    const local = JSON.parse(
      (await new FileArtifactStore(join(fixture.directory, 'stage-out')).getBuffer('scores.json')).toString('utf8'),
    ) as EvalScores;
    expectHandComputedScores(local);
    expect(comparable(local)).toEqual(comparable(queued));
  }, 240_000);

  it('a judge that is down leaves rule scores intact and marks judge scores missing', async () => {
    const config: EvalInputConfig = {
      ...fixture.config,
      suites: { custom: { prompts: fixture.customFile } },
      judge: {
        model: { adapter: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'judge', maxRetries: 0, timeoutMs: 2000 },
        suites: ['custom'],
      },
    };
    const configFile = join(fixture.directory, 'judge-down.yaml');
    await writeFile(configFile, JSON.stringify(config));
    const out = join(fixture.directory, 'judge-down');
    const cli = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'stage',
      'eval',
      '--config',
      configFile,
      '--out',
      pathToFileURL(out).href,
      '--seed',
      'int',
    );
    expect(cli.code).toBe(0);
    const scores = JSON.parse(
      (await new FileArtifactStore(out).getBuffer('scores.json')).toString('utf8'),
    ) as EvalScores;
    expect(scores.scores.good.custom!.overall).toMatchObject({ score: 100, items: 2 });
    expect(scores.scores.weak.custom!.overall).toMatchObject({ score: 50, items: 2 });
    expect(scores.scores.good.judge!.custom).toEqual({ overall: null, missing: 3 });
    expect(scores.scores.good.metrics['judge.custom']).toBeUndefined();
    expect(scores.judge!.missing).toBe(6);
    expect((await new FileArtifactStore(out).getBuffer('report.html')).toString('utf8')).toContain(
      '6 items have no judge verdict',
    );
  }, 120_000);
});

describe('eval stage: an endpoint that is down for a while', () => {
  let kit: QueueTestKit;
  let server: OpenAiTestServer;
  beforeEach(async () => {
    kit = await createQueueTestKit();
  });
  afterEach(async () => {
    await server?.close();
    await kit.cleanup();
  });

  it('fails the part as transient, retries it, and ends with every item scored once (nothing lost, nothing twice)', async () => {
    let refused = 0;
    server = await OpenAiTestServer.start({
      models: ['flaky'],
      responder: (request) => {
        // The first three requests find the server down (503), then it answers.
        if (refused < 3) {
          refused += 1;
          return { fault: { kind: 'status', status: 503, message: 'warming up' } };
        }
        const prompt = (request.body.messages as ChatMessage[])[0].content as string;
        return { content: prompt.includes('commas') || prompt.includes('Japan') ? english.noCommas : english.capitals };
      },
    });
    await kit.startWorkers({ queues: ['eval', 'runs'] });
    const config: EvalInputConfig = {
      models: [
        { label: 'flaky', model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'flaky', maxRetries: 0 } },
      ],
      suites: { ifeval: { keys: [noComma, lowercase, capitals] } },
      bootstrapSamples: 100,
    };
    await enqueueRun(
      kit.context,
      planRun(
        { runId: 'eval-flaky', stages: { eval: config } },
        { env: kit.env, now: new Date('2025-03-01T00:00:00Z') },
      ),
    );
    const status = await watchRun(kit.context, 'eval-flaky', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    expect(refused).toBe(3);
    const scores = JSON.parse(
      (await kit.store.getBuffer('runs/eval-flaky/eval/scores.json')).toString('utf8'),
    ) as EvalScores;
    // 1001 (no commas) followed, 1051 (lowercase) broken by capitals, 1566 (capitals) followed.
    expect(scores.scores.flaky.ifeval).toMatchObject({ count: 3, promptStrict: 200 / 3 });
    expect(scores.scores.flaky.modelErrors).toBe(0);
    const manifest = await readManifest(kit.store, 'runs/eval-flaky/eval/manifest.json');
    const results: EvalResult[] = [];
    for (const object of manifest.objects.filter((entry) => entry.kind === 'results'))
      for await (const record of readJsonl<EvalResult>(kit.store, object.key)) results.push(record);
    expect(results.map((result) => result.itemId).sort()).toEqual(
      [`ifeval-${noComma}`, `ifeval-${capitals}`, `ifeval-${lowercase}`].sort(),
    );
  }, 120_000);
});
