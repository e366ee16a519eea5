import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { runStageLocally } from '../../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../../shared/artifacts/file-artifact-store';
import { readManifest } from '../../../shared/artifacts/manifest';
import { ifevalDataDirectory } from '../../../shared/eval/ifeval';
import { silentLogger } from '../../../shared/log/logger';
import { OpenAiTestServer } from '../../../shared/models/testing/openai-test-server';
import { bootstrapMean } from '../bootstrap-interval';
import { evalInputSchema, type EvalOutput } from '../eval-contract';
import type { EvalScores } from '../eval-scores';
import type { LmEvalResultsDocument } from '../lm-eval-results';
import { evalStage } from '../processor';
import { defineEvalSuite } from './eval-suite';
import { registerEvalSuite } from './registry';
import { askPrompt } from './suite-kit';

/**
 * A suite made here, in the test, registered and run end to end through the stage (plan, parts,
 * finish, report, lm-eval output) with no other file naming it: what adding a suite takes.
 */
const wordItemSchema = z.object({ suite: z.literal('word_count'), id: z.string(), words: z.number().int() });

const wordCountSuite = defineEvalSuite({
  name: 'word_count',
  version: 3,
  title: 'Word count',
  shortName: 'WC',
  configSchema: z.object({ counts: z.array(z.number().int().positive()).min(1) }).strict(),
  itemSchema: wordItemSchema,
  needsHarness: false,
  usesTrainingFootprint: false,
  headlineMetric: 'word_count',
  async buildItems(config) {
    return {
      items: config.counts.map((words) => ({ suite: 'word_count' as const, id: `words-${words}`, words })),
      lineage: [],
    };
  },
  promptText: (item) => `Answer in exactly ${item.words} words.`,
  contaminationText: (item) => `Answer in exactly ${item.words} words.`,
  failedChecks: () => [],
  async evaluate(item, context) {
    const answer = await askPrompt(context.base.prompt, context, { maxTokens: 32, failedChecks: [] });
    if (!answer.ok) return answer.result;
    const words = answer.response.trim().split(/\s+/).length;
    return {
      ...context.base,
      response: answer.response,
      status: 'ok',
      score: words === item.words ? 100 : 0,
      checks: [],
      latencyMs: answer.latencyMs,
      calls: 1,
      usage: answer.usage,
    };
  },
  outcomeScore: (result) => result.score,
  score(results, { samples, seed }) {
    const overall = bootstrapMean(
      results.map((result) => result.score ?? 0),
      samples,
      seed,
    );
    return { breakdown: { overall }, headline: overall, metrics: { word_count: overall.score } };
  },
  reportHtml: ({ labels, breakdownOf }) =>
    `<h2>Word count</h2><p>${labels.map((label) => `${label}: ${breakdownOf(label)?.overall.score}`).join(', ')}</p>`,
});

const directories: string[] = [];
let server: OpenAiTestServer;
beforeAll(async () => {
  // Every answer is three words.
  server = await OpenAiTestServer.start({ responder: () => ({ content: 'one two three' }) });
});
afterAll(async () => {
  await server.close();
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

const served = () => ({
  label: 'served',
  model: { adapter: 'openai' as const, baseUrl: server.baseUrl, model: 'test-model', maxRetries: 0 },
});

async function runEval(config: unknown): Promise<{ store: FileArtifactStore; output: EvalOutput; directory: string }> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-eval-suites-'));
  directories.push(directory);
  const store = new FileArtifactStore(directory);
  const result = await runStageLocally(evalStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'suites',
    concurrency: 1,
  });
  return { store, output: result.output as EvalOutput, directory };
}

const json = async <T>(store: FileArtifactStore, key: string): Promise<T> =>
  JSON.parse((await store.getBuffer(key)).toString('utf8')) as T;

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

describe('eval suites as a table', () => {
  it('a suite defined and registered in a test runs through plan, parts, finish, report and lm-eval output', async () => {
    const config = { models: [served()], suites: { word_count: { counts: [3, 5] } }, bootstrapSamples: 100 };
    // Unknown until registered: the config names the suites there are.
    expect(evalInputSchema.safeParse(config).error?.issues[0]?.message).toMatch(/"word_count" is not an eval suite/);
    const unregister = registerEvalSuite(wordCountSuite);
    try {
      const { store, output } = await runEval(config);
      // "one two three" has 3 words: words-3 passes, words-5 fails.
      expect(output.leaderboard.served.word_count.score).toBe(50);
      expect(output.items).toBe(2);
      const scores = await json<EvalScores>(store, 'scores.json');
      expect(scores.scores.served.metrics).toEqual({ word_count: 50 });
      expect(scores.scores.served.items.word_count.map((item) => [item.id, item.score])).toEqual([
        ['words-3', 100],
        ['words-5', 0],
      ]);
      // Its version, and the hash of the generated item set (no data file behind it).
      expect(scores.suites.word_count).toEqual({
        items: 2,
        version: 3,
        data: {
          source: 'generated items',
          sha256: sha256(
            ['{"suite":"word_count","id":"words-3","words":3}', '{"suite":"word_count","id":"words-5","words":5}'].join(
              '\n',
            ),
          ),
        },
      });
      const report = (await store.getBuffer('report.html')).toString('utf8');
      expect(report).toContain('<th>Word count</th>');
      expect(report).toContain('<h2>Word count</h2><p>served: 50</p>');
      // Default lm-eval metric: `score`, the mean outcome 0–1 with its standard error (√(0.5/2) = 0.5).
      const lmEval = await json<LmEvalResultsDocument>(store, 'lm-eval/served/results.json');
      expect(lmEval.results.word_count).toEqual({ alias: 'word_count', 'score,none': 0.5, 'score_stderr,none': 0.5 });
      expect(lmEval.versions).toEqual({ word_count: 3 });
      expect(lmEval['n-samples']).toEqual({ word_count: { original: 2, effective: 2 } });
      const manifest = await readManifest(store, 'manifest.json');
      expect(manifest.objects.find((object) => object.kind === 'lm-eval-results')?.key).toBe(
        'lm-eval/served/results.json',
      );
    } finally {
      unregister();
    }
    expect(evalInputSchema.safeParse(config).success).toBe(false);
  }, 60_000);

  it('scores.json records each suite version and data sha256; lm-eval results carry the IFEval figures', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-eval-suites-data-'));
    directories.push(directory);
    const prompts = join(directory, 'prompts.jsonl');
    const promptText =
      [
        { id: 'lower', prompt: 'Say hi', checks: [{ instruction: 'change_case:english_lowercase' }] },
        { id: 'caps', prompt: 'Say hi loudly', checks: [{ instruction: 'change_case:english_capital' }] },
      ]
        .map((record) => JSON.stringify(record))
        .join('\n') + '\n';
    await writeFile(prompts, promptText);
    const { store } = await runEval({
      models: [served()],
      suites: { ifeval: { size: 6, seed: 'lm' }, custom: { prompts } },
      bootstrapSamples: 100,
    });
    const scores = await json<EvalScores>(store, 'scores.json');
    const ifevalFile = await readFile(join(ifevalDataDirectory(), 'input_data.jsonl'));
    expect(scores.suites.ifeval).toEqual({
      items: 6,
      version: 1,
      data: { source: 'data/ifeval/input_data.jsonl', sha256: sha256(ifevalFile) },
    });
    expect(scores.suites.custom.data?.sha256).toBe(sha256(promptText));
    expect(scores.suites.custom.version).toBe(1);

    const lmEval = await json<LmEvalResultsDocument>(store, 'lm-eval/served/results.json');
    const ifeval = scores.scores.served.ifeval!;
    const strict = scores.scores.served.items.ifeval.map((item) => (item.score === 100 ? 1 : 0));
    const p = strict.reduce<number>((sum, value) => sum + value, 0) / strict.length;
    expect(lmEval.results.ifeval).toEqual({
      alias: 'ifeval',
      'prompt_level_strict_acc,none': ifeval.promptStrict / 100,
      'prompt_level_strict_acc_stderr,none': expect.closeTo(Math.sqrt((p * (1 - p) * 6) / 5 / 6), 12),
      'inst_level_strict_acc,none': ifeval.instructionStrict / 100,
      'inst_level_strict_acc_stderr,none': 'N/A',
      'prompt_level_loose_acc,none': ifeval.promptLoose / 100,
      'prompt_level_loose_acc_stderr,none': expect.any(Number),
      'inst_level_loose_acc,none': ifeval.instructionLoose / 100,
      'inst_level_loose_acc_stderr,none': 'N/A',
    });
    // "one two three" is lowercase, not capitals: custom prompt-level strict 0.5.
    expect(lmEval.results.custom['prompt_level_strict_acc,none']).toBe(0.5);
    expect(lmEval.versions).toEqual({ ifeval: 1, custom: 1 });
    expect(lmEval['n-shot']).toEqual({ ifeval: 0, custom: 0 });
    expect(lmEval['n-samples'].ifeval).toEqual({ original: 6, effective: 6 });
    expect(lmEval.higher_is_better.ifeval).toEqual({
      prompt_level_strict_acc: true,
      inst_level_strict_acc: true,
      prompt_level_loose_acc: true,
      inst_level_loose_acc: true,
    });
    expect(lmEval.configs.ifeval).toMatchObject({
      task: 'ifeval',
      num_fewshot: 0,
      output_type: 'generate_until',
      metadata: { version: 1, data_sha256: sha256(ifevalFile) },
    });
    expect(lmEval.config).toMatchObject({ model: 'openai', model_args: `model=test-model,base_url=${server.baseUrl}` });
    expect(lmEval.model_name).toBe('test-model');
  }, 60_000);
});
