import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import {
  checkIfevalResponse,
  ifevalDataDirectory,
  loadIfevalItems,
  scoreIfeval,
  type IfevalScores,
} from '../../../shared/eval/ifeval';
import { BadInputError } from '../../../shared/errors';
import { sha256Hex } from '../../../shared/hash/hash';
import { Rng } from '../../../shared/random/rng';
import { escapeHtml } from '../../../shared/report/html';
import { bootstrapMean, type Interval } from '../bootstrap-interval';
import { fixed } from '../report-cells';
import { defineEvalSuite } from './eval-suite';
import { askPrompt, meanStderr, seedValue } from './suite-kit';

/**
 * IFEval (Zhou et al., 2023): the 541 shipped prompts (or a seeded draw, or given keys), one
 * answer each, the reference's strict and loose checks; headline prompt-level strict.
 */

export const ifevalSuiteSchema = z
  .object({
    /** Prompts drawn (seeded) from the 541. Default: all of them. */
    size: z.number().int().min(1).max(541).optional(),
    /** Or exactly these prompt keys. */
    keys: z.array(z.number().int().nonnegative()).min(1).optional(),
    seed: seedValue.default('eval/ifeval'),
    /** Tokens per response at most. Default 1024. */
    maxTokens: z.number().int().positive().default(1024),
  })
  .strict()
  .refine((suite) => suite.size === undefined || suite.keys === undefined, {
    message: 'give size or keys, not both',
    path: ['keys'],
  });

export const ifevalItemSchema = z.object({
  suite: z.literal('ifeval'),
  id: z.string(),
  key: z.number().int(),
  prompt: z.string(),
  instructionIds: z.array(z.string()),
  kwargs: z.array(z.record(z.string(), z.unknown())),
});

export type IfevalBreakdown = IfevalScores & { promptStrictInterval: Interval };

/** The shipped prompts file (`data/ifeval/input_data.jsonl`), what the items are drawn from. */
function ifevalPromptsFile(): string {
  return join(ifevalDataDirectory(), 'input_data.jsonl');
}

function failedIfevalChecks(item: z.infer<typeof ifevalItemSchema>) {
  return item.instructionIds.map((name) => ({ name, strict: false, loose: false }));
}

export const ifevalSuite = defineEvalSuite({
  name: 'ifeval',
  version: 1,
  title: 'IFEval (prompt strict)',
  shortName: 'IFEval',
  configSchema: ifevalSuiteSchema,
  itemSchema: ifevalItemSchema,
  needsHarness: false,
  usesTrainingFootprint: false,
  headlineMetric: 'ifeval.prompt_strict',

  async buildItems(ifeval) {
    const all = loadIfevalItems();
    let chosen = all;
    if (ifeval.keys) {
      const byKey = new Map(all.map((item) => [item.key, item]));
      const missing = ifeval.keys.filter((key) => !byKey.has(key));
      if (missing.length > 0)
        throw new BadInputError(
          'EVAL_BAD_SUITE',
          `suites.ifeval.keys: no IFEval prompt has key ${missing.slice(0, 5).join(', ')}; use keys of the shipped input_data.jsonl`,
        );
      chosen = ifeval.keys.map((key) => byKey.get(key)!);
    } else if (ifeval.size !== undefined && ifeval.size < all.length) {
      chosen = new Rng(`eval-ifeval/${ifeval.seed}`)
        .shuffle(all)
        .slice(0, ifeval.size)
        .sort((left, right) => left.key - right.key);
    }
    const items = chosen.map((item) => ({
      suite: 'ifeval' as const,
      id: `ifeval-${item.key}`,
      key: item.key,
      prompt: item.prompt,
      instructionIds: item.instructionIds,
      kwargs: item.kwargs,
    }));
    return {
      items,
      lineage: [],
      data: { source: 'data/ifeval/input_data.jsonl', sha256: sha256Hex(readFileSync(ifevalPromptsFile())) },
    };
  },

  promptText: (item) => item.prompt,
  contaminationText: (item) => item.prompt,
  failedChecks: failedIfevalChecks,

  async evaluate(item, context) {
    const answer = await askPrompt(item.prompt, context, {
      maxTokens: context.config.maxTokens,
      failedChecks: failedIfevalChecks(item),
    });
    if (!answer.ok) return answer.result;
    const outcome = checkIfevalResponse(
      { key: item.key, prompt: item.prompt, instructionIds: item.instructionIds, kwargs: item.kwargs },
      answer.response,
    );
    return {
      ...context.base,
      response: answer.response,
      status: 'ok',
      score: outcome.followedStrict ? 100 : 0,
      checks: item.instructionIds.map((name, index) => ({
        name,
        strict: outcome.strict[index] ?? false,
        loose: outcome.loose[index] ?? false,
      })),
      followedStrict: outcome.followedStrict,
      followedLoose: outcome.followedLoose,
      latencyMs: answer.latencyMs,
      calls: 1,
      usage: answer.usage,
    };
  },

  outcomeScore: (result) => (result.followedStrict ? 100 : 0),

  score(results, { samples, seed }) {
    const itemResults = results.map((result) => ({
      key: Number(result.itemId.replace(/^ifeval-/, '')),
      instructionIds: result.checks.map((check) => check.name),
      strict: result.checks.map((check) => check.strict),
      loose: result.checks.map((check) => check.loose),
      followedStrict: result.followedStrict ?? false,
      followedLoose: result.followedLoose ?? false,
    }));
    const breakdown: IfevalBreakdown = {
      ...scoreIfeval(itemResults),
      promptStrictInterval: bootstrapMean(
        results.map((result) => (result.followedStrict ? 100 : 0)),
        samples,
        seed,
      ),
    };
    return {
      breakdown,
      headline: { ...breakdown.promptStrictInterval, score: breakdown.promptStrict },
      metrics: {
        ifeval: breakdown.promptStrict,
        'ifeval.prompt_strict': breakdown.promptStrict,
        'ifeval.instruction_strict': breakdown.instructionStrict,
        'ifeval.prompt_loose': breakdown.promptLoose,
        'ifeval.instruction_loose': breakdown.instructionLoose,
      },
    };
  },

  reportHtml({ labels, modelName, breakdownOf }) {
    return `<h2>IFEval</h2><table><tr><th></th><th>prompts</th><th>prompt strict</th><th>instruction strict</th><th>prompt loose</th><th>instruction loose</th></tr>${labels
      .map((label) => {
        const ifeval = breakdownOf(label);
        return `<tr><th>${escapeHtml(modelName(label))}</th><td>${ifeval?.count ?? 0}</td><td>${fixed(ifeval?.promptStrict)}</td><td>${fixed(ifeval?.instructionStrict)}</td><td>${fixed(ifeval?.promptLoose)}</td><td>${fixed(ifeval?.instructionLoose)}</td></tr>`;
      })
      .join('')}</table>`;
  },

  /** lm-evaluation-harness's ifeval task: the four accuracies as 0–1; instruction-level stderr "N/A" as there. */
  lmEvalMetrics(breakdown, results) {
    const prompts = (loose: boolean) =>
      results.map((result) => ((loose ? result.followedLoose : result.followedStrict) ? 1 : 0));
    return [
      {
        name: 'prompt_level_strict_acc',
        value: breakdown.promptStrict / 100,
        stderr: meanStderr(prompts(false)),
        higherIsBetter: true,
      },
      { name: 'inst_level_strict_acc', value: breakdown.instructionStrict / 100, stderr: 'N/A', higherIsBetter: true },
      {
        name: 'prompt_level_loose_acc',
        value: breakdown.promptLoose / 100,
        stderr: meanStderr(prompts(true)),
        higherIsBetter: true,
      },
      { name: 'inst_level_loose_acc', value: breakdown.instructionLoose / 100, stderr: 'N/A', higherIsBetter: true },
    ];
  },
});
