import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { readManifest } from '../../shared/artifacts/manifest';
import { loadIfevalItems } from '../../shared/eval/ifeval';
import { exitCodeOf } from '../../shared/errors';
import { silentLogger } from '../../shared/log/logger';
import { OpenAiTestServer } from '../../shared/models/testing/openai-test-server';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { taskSchema } from '../../shared/simulator/tasks/task-schema';
import { builtinPromptsDirectory } from '../distill/prompt-sources';
import { normalizePromptText } from './contamination';
import { evalInputSchema, type EvalInputConfig, type EvalOutput } from './eval-contract';
import { buildSuiteItems, heldOutTasks } from './eval-items';
import type { EvalResult } from './eval-part';
import type { EvalScores } from './eval-scores';
import { evalStage } from './processor';

const directories: string[] = [];
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

async function runEval(
  config: EvalInputConfig,
  seed = 'unit',
): Promise<{ store: FileArtifactStore; output: EvalOutput; directory: string }> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-eval-'));
  directories.push(directory);
  const store = new FileArtifactStore(directory);
  const result = await runStageLocally(evalStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed,
    concurrency: 1,
  });
  return { store, output: result.output as EvalOutput, directory };
}

async function scoresOf(store: FileArtifactStore): Promise<EvalScores> {
  return JSON.parse((await store.getBuffer('scores.json')).toString('utf8')) as EvalScores;
}

async function resultsOf(store: FileArtifactStore): Promise<EvalResult[]> {
  const manifest = await readManifest(store, 'manifest.json');
  const results: EvalResult[] = [];
  for (const object of manifest.objects.filter((entry) => entry.kind === 'results'))
    for await (const record of readJsonl<EvalResult>(store, object.key)) results.push(record);
  return results;
}

describe('eval stage with simulator policies (in-process)', () => {
  it('scores the scripted expert 100 on every category and the stochastic policy lower, side by side with intervals', async () => {
    const { store, output } = await runEval({
      models: [
        { label: 'expert', model: { adapter: 'scripted', policy: 'expert' } },
        {
          label: 'noisy',
          model: {
            adapter: 'scripted',
            policy: 'stochastic',
            errorRates: { wrongArgument: 0.5, hallucinatedNumber: 0.5 },
          },
        },
      ],
      suites: {
        live_stream_qa: { size: 22 },
        harness_variant_qa: { size: 4, variantsPerTask: 1, heldOutFamilies: ['hooks'] },
      },
      itemsPerPart: 10,
      bootstrapSamples: 200,
    });
    const scores = await scoresOf(store);
    const expert = scores.scores.expert;
    expect(expert.live_stream_qa!.overall).toMatchObject({ score: 100, low: 100, high: 100, items: 22 });
    expect(Object.keys(expert.live_stream_qa!.byCategory)).toHaveLength(11);
    expect(
      Object.values(expert.live_stream_qa!.byCategory).every((cell) => cell.score === 100 && cell.items === 2),
    ).toBe(true);
    const noisy = scores.scores.noisy.live_stream_qa!.overall;
    expect(noisy.score).toBeLessThan(100);
    expect(noisy.low).toBeLessThanOrEqual(noisy.score);
    expect(noisy.high).toBeGreaterThanOrEqual(noisy.score);
    // Harness-Variant QA: 4 tasks × (canonical + 1 variant + 1 held-out-operator variant).
    expect(scores.suites.harness_variant_qa).toMatchObject({ items: 12, version: 1 });
    const variants = expert.harness_variant_qa!;
    expect(variants.canonical.items).toBe(4);
    expect(variants.variant.items).toBe(8);
    expect(variants.heldOutOperators!.items).toBe(4);
    // No training manifests: every variant is held out.
    expect(variants.heldOutVariantShare).toBe(1);
    expect(variants.gap.score).toBeCloseTo(variants.canonical.score - variants.variant.score, 9);
    expect(Object.keys(variants.byFamily)).toContain('hooks');
    expect(output.leaderboard.expert.live_stream_qa.score).toBe(100);
    expect(output.simulatedModels).toEqual(['expert', 'noisy']);
    // The default comparison: the first model against each other, paired on the same items.
    const paired = scores.comparisons.find((comparison) => comparison.suite === 'live_stream_qa')!;
    expect(paired).toMatchObject({ a: 'expert', b: 'noisy' });
    expect(paired.difference.score).toBeCloseTo(100 - noisy.score, 9);
    expect(paired.difference.low).toBeGreaterThanOrEqual(0);
    const html = (await store.getBuffer('report.html')).toString('utf8');
    expect(html).toContain('Leaderboard');
    expect(html).toContain('expert (dummy weights)');
    expect(html).toContain('By HSA family');
    const results = await resultsOf(store);
    expect(results).toHaveLength(2 * (22 + 12));
    expect(results.every((result) => result.response.length > 0 || result.status !== 'ok')).toBe(true);
  }, 120_000);

  it('plays imported production Q&A beside the held-out tasks and reports them apart', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-eval-imported-'));
    directories.push(directory);
    await writeJsonl(
      new FileArtifactStore(directory),
      'imported.jsonl.gz',
      generateTasks({ count: 3, seed: 'production' }),
      { schema: taskSchema },
    );
    const { store } = await runEval({
      models: [{ label: 'expert', model: { adapter: 'scripted' } }],
      suites: { live_stream_qa: { size: 11, tasks: join(directory, 'imported.jsonl.gz') } },
      bootstrapSamples: 100,
    });
    const live = (await scoresOf(store)).scores.expert.live_stream_qa!;
    expect(live.overall.items).toBe(14);
    expect(Object.fromEntries(Object.entries(live.byOrigin).map(([origin, cell]) => [origin, cell.items]))).toEqual({
      generated: 11,
      imported: 3,
    });
  }, 60_000);

  it('is deterministic under the seed: the same config gives byte-identical scores.json', async () => {
    const config: EvalInputConfig = {
      models: [{ label: 'noisy', model: { adapter: 'scripted', policy: 'stochastic' } }],
      suites: { live_stream_qa: { size: 11 } },
      bootstrapSamples: 200,
    };
    const first = await runEval(config);
    const second = await runEval(config);
    expect((await second.store.getBuffer('scores.json')).equals(await first.store.getBuffer('scores.json'))).toBe(true);
  }, 60_000);
});

describe('eval stage: contamination', () => {
  async function trainingSet(directory: string, taskIds: string[], prompts: string[]): Promise<string> {
    const store = new FileArtifactStore(directory);
    const records = [
      ...taskIds.map((taskId) => ({ taskId, messages: [{ role: 'user', content: 'hi' }] })),
      ...prompts.map((prompt, index) => ({ id: `p-${index}`, prompt })),
    ];
    await writeJsonl(store, 'training/part-00000.jsonl.gz', records);
    return join(directory, 'training/part-00000.jsonl.gz');
  }

  it('refuses (exit 2) items whose task id or normalized prompt text is in the training data, naming them', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-eval-train-'));
    directories.push(directory);
    const [task] = heldOutTasks(1, 'eval/live_stream_qa');
    const ifevalPrompt = loadIfevalItems().find((item) => item.key === 1000)?.prompt ?? loadIfevalItems()[0].prompt;
    const training = await trainingSet(directory, [task.id], [`  ${ifevalPrompt.toUpperCase()}!! `]);
    const config: EvalInputConfig = {
      models: [{ label: 'expert', model: { adapter: 'scripted' } }],
      suites: {
        live_stream_qa: { size: 3 },
        ifeval: { keys: [loadIfevalItems().find((item) => item.prompt === ifevalPrompt)!.key] },
      },
      trainingManifests: [training],
    };
    const error = await runEval(config).catch((caught: unknown) => caught);
    expect(exitCodeOf(error)).toBe(2);
    expect(String((error as Error).message)).toMatch(/^\[EVAL_CONTAMINATED\] 2 eval item/);
    expect((error as Error).message).toContain(`live_stream_qa/${task.id} (task id)`);
    expect((error as Error).message).toMatch(
      /ifeval\/ifeval-\d+ \(100% of its n-grams in record p-0 of file:\/\/.*part-00000\.jsonl\.gz\)/,
    );
  }, 60_000);

  it('with allowOverlap evaluates anyway and shows the overlapping ids in scores and report', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-eval-train-'));
    directories.push(directory);
    const [task] = heldOutTasks(1, 'eval/live_stream_qa');
    const training = await trainingSet(directory, [task.id], []);
    const { store, output } = await runEval({
      models: [{ label: 'expert', model: { adapter: 'scripted' } }],
      suites: { live_stream_qa: { size: 2 } },
      trainingManifests: [training],
      allowOverlap: true,
      bootstrapSamples: 100,
    });
    expect(output.overlapping).toBe(1);
    const scores = await scoresOf(store);
    expect(scores.contamination.overlapping).toEqual([
      { suite: 'live_stream_qa', itemId: task.id, matchedBy: 'task_id' },
    ]);
    expect((await store.getBuffer('report.html')).toString('utf8')).toContain(task.id);
  }, 60_000);

  it('the shipped distillation prompts share no prompt with IFEval', async () => {
    const text = await readFile(join(builtinPromptsDirectory(), 'general-instructions.jsonl'), 'utf8');
    const shipped = text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { prompt?: string; messages?: Array<{ role: string; content: string }> })
      .flatMap((record) => [
        record.prompt ?? '',
        ...(record.messages ?? []).filter((message) => message.role === 'user').map((message) => message.content),
      ])
      .filter(Boolean)
      .map(normalizePromptText);
    expect(shipped.length).toBeGreaterThanOrEqual(60);
    const ifeval = new Set(loadIfevalItems().map((item) => normalizePromptText(item.prompt)));
    expect(shipped.filter((prompt) => ifeval.has(prompt))).toEqual([]);
  });
});

describe('eval stage: custom prompts', () => {
  it('the example prompt file (examples/eval/custom-prompts.jsonl) is valid: rule checks and a judged rubric', async () => {
    const file = join(__dirname, '..', '..', 'examples', 'eval', 'custom-prompts.jsonl');
    const input = evalInputSchema.parse({
      models: [{ label: 'x', model: { adapter: 'scripted' } }],
      suites: { custom: { prompts: file } },
      judge: { model: { adapter: 'scripted' }, suites: ['custom'] },
    });
    const [suite] = await buildSuiteItems(
      input,
      undefined,
      { variantHashes: new Set(), variantDirs: new Map(), variantFamilies: new Map() },
      (uri) => openArtifactObject(uri),
    );
    expect(suite.items.map((item) => item.id)).toEqual([
      'host-intro-lowercase',
      'coupon-no-commas',
      'care-tips-ps',
      'size-advice-short',
      'warm-pitch',
    ]);
  });

  it('refuses a custom check the IFEval vocabulary does not have (exit 2, file and record named)', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-eval-custom-'));
    directories.push(directory);
    const file = join(directory, 'prompts.jsonl');
    await writeFile(
      file,
      `${JSON.stringify({ id: 'a', prompt: 'Say hi', checks: [{ instruction: 'punctuation:no_semicolons' }] })}\n`,
    );
    const error = await runEval({
      models: [{ label: 'expert', model: { adapter: 'scripted' } }],
      suites: { custom: { prompts: file } },
    }).catch((caught: unknown) => caught);
    expect(exitCodeOf(error)).toBe(2);
    expect((error as Error).message).toContain('[EVAL_BAD_CUSTOM_PROMPTS]');
    expect((error as Error).message).toContain('record 1.checks.0');
  });
});

describe('eval item deadlines', () => {
  it('an item past itemTimeoutMs is recorded as a timeout (score 0); the others answer', async () => {
    const server = await OpenAiTestServer.start({
      responder: (request) => {
        const content = (request.body.messages as Array<{ content: string }>)[0]!.content;
        return content === 'slow' ? { fault: { kind: 'slow-first-byte', delayMs: 5_000 } } : { content: 'fast answer' };
      },
    });
    try {
      const directory = await mkdtemp(join(tmpdir(), 'hat-eval-deadline-'));
      directories.push(directory);
      const prompts = join(directory, 'prompts.jsonl');
      await writeFile(
        prompts,
        ['slow', 'quick one', 'quick two']
          .map((prompt, index) =>
            JSON.stringify({ id: `p${index}`, prompt, checks: [{ instruction: 'punctuation:no_comma' }] }),
          )
          .join('\n') + '\n',
      );
      const { store } = await runEval({
        models: [
          {
            label: 'served',
            model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'test-model', maxRetries: 0 },
          },
        ],
        suites: { custom: { prompts } },
        itemTimeoutMs: 300,
        bootstrapSamples: 100,
      });
      const results = (await resultsOf(store)).sort((left, right) => left.itemId.localeCompare(right.itemId));
      expect(results.map((result) => [result.itemId, result.status, result.score])).toEqual([
        ['p0', 'timeout', 0],
        ['p1', 'ok', 100],
        ['p2', 'ok', 100],
      ]);
      expect(results[0]!.error).toMatch(/EVAL_ITEM_TIMEOUT|itemTimeoutMs/);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('generated suites: text', () => {
  it("take collect's text knob (cjk-heavy held-out tasks) and refuse a text they do not know", async () => {
    const models = [{ label: 'expert', model: { adapter: 'scripted' } }];
    const input = evalInputSchema.parse({ models, suites: { live_stream_qa: { size: 4, text: 'cjk-heavy' } } });
    const [suite] = await buildSuiteItems(
      input,
      undefined,
      { variantHashes: new Set(), variantDirs: new Map(), variantFamilies: new Map() },
      (uri) => openArtifactObject(uri),
    );
    const tasks = heldOutTasks(4, 'eval/live_stream_qa', undefined, undefined, 'cjk-heavy');
    expect(suite.items.map((item) => item.id)).toEqual(tasks.map((task) => task.id));
    expect(tasks.every((task) => task.source.kind === 'generated' && task.source.text === 'cjk-heavy')).toBe(true);
    expect(tasks.map((task) => task.id)).not.toEqual(heldOutTasks(4, 'eval/live_stream_qa').map((task) => task.id));
    const refused = evalInputSchema.safeParse({ models, suites: { harness_variant_qa: { size: 2, text: 'cjk' } } });
    expect(refused.success).toBe(false);
    expect(JSON.stringify(refused.error?.issues)).toContain('"text"');
  });
});
