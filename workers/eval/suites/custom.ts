import { z } from 'zod';
import type { StageDeps } from '../../../queues/stage-kit/define-stage';
import { readRecordRange } from '../../../queues/stage-kit/stage-inputs';
import { checkInstruction, validateInstructionSpec } from '../../../shared/eval/ifeval';
import { BadInputError, ProblemCollector } from '../../../shared/errors';
import { escapeHtml } from '../../../shared/report/html';
import { bootstrapMean, type Interval } from '../bootstrap-interval';
import { fixed } from '../report-cells';
import { defineEvalSuite } from './eval-suite';
import { asArtifactUri, askPrompt, meanStderr, refuseDuplicateIds, ruleCheckSchema, scoreOf } from './suite-kit';

/**
 * Custom prompts: a user JSONL of prompts with rule checks from the IFEval vocabulary (validated
 * at plan) and/or a rubric for the judge. Score 100 when every check passes (strict).
 */

export const customSuiteSchema = z
  .object({
    /** JSONL of `{ id, prompt, checks?: [{ instruction, kwargs? }], rubric? }` (file, `file://` or `s3://`). */
    prompts: z.string().min(1),
    /** Tokens per response at most. Default 1024. */
    maxTokens: z.number().int().positive().default(1024),
  })
  .strict();

/** A line of a custom prompt file. */
export const customPromptSchema = z
  .object({
    id: z.string().min(1),
    prompt: z.string().min(1),
    /** Rule checks from the IFEval instruction vocabulary, e.g. `{ instruction: "punctuation:no_comma" }`. */
    checks: z.array(ruleCheckSchema).default([]),
    /** What a judge should look for (needs `judge` with `custom` in its suites). */
    rubric: z.string().min(1).optional(),
  })
  .strict();

export const customItemSchema = z.object({
  suite: z.literal('custom'),
  id: z.string(),
  prompt: z.string(),
  checks: z.array(ruleCheckSchema),
  rubric: z.string().optional(),
});
type CustomItem = z.infer<typeof customItemSchema>;

export interface CustomBreakdown {
  overall: Interval | null;
  instructionStrict: number | null;
  instructionLoose: number | null;
  promptLoose: number | null;
}

async function readCustomPrompts(
  uri: string,
  openObject: StageDeps['openObject'],
): Promise<{ records: Array<z.infer<typeof customPromptSchema>>; sha256: string }> {
  const { store, key } = openObject(uri);
  if (!(await store.head(key)))
    throw new BadInputError('MISSING_INPUT', `suites.custom.prompts: ${uri} does not exist; check the path`);
  return readRecordRange(openObject, uri, customPromptSchema);
}

function failedCustomChecks(item: CustomItem) {
  return item.checks.map((check) => ({ name: check.instruction, strict: false, loose: false }));
}

export const customSuite = defineEvalSuite({
  name: 'custom',
  version: 1,
  title: 'Custom (rules)',
  shortName: 'custom',
  configSchema: customSuiteSchema,
  itemSchema: customItemSchema,
  needsHarness: false,
  usesTrainingFootprint: false,
  headlineMetric: 'custom',

  async buildItems(custom, context) {
    const uri = asArtifactUri(custom.prompts);
    const { records, sha256 } = await readCustomPrompts(uri, context.openObject);
    const judged = context.input.judge?.suites.includes('custom') ?? false;
    const problems = new ProblemCollector();
    records.forEach((record, index) => {
      for (const [checkIndex, check] of record.checks.entries()) {
        for (const message of validateInstructionSpec(check.instruction, check.kwargs)) {
          problems.add({ file: custom.prompts, path: `record ${index + 1}.checks.${checkIndex}`, message });
        }
      }
      if (record.checks.length === 0 && (record.rubric === undefined || !judged)) {
        problems.add({
          file: custom.prompts,
          path: `record ${index + 1}`,
          message: `prompt "${record.id}" has no rule checks${record.rubric ? ' and no judge rates custom' : ' and no rubric'}; add checks, or a rubric and judge: { suites: [custom] }`,
        });
      }
    });
    problems.throwIfAny('EVAL_BAD_CUSTOM_PROMPTS', `${custom.prompts} has problems; fix them and run again`);
    const items: CustomItem[] = records.map((record) => ({
      suite: 'custom',
      id: record.id,
      prompt: record.prompt,
      checks: record.checks,
      ...(record.rubric ? { rubric: record.rubric } : {}),
    }));
    refuseDuplicateIds(items, custom.prompts);
    return { items, lineage: [{ uri, sha256 }], data: { source: uri, sha256 } };
  },

  promptText: (item) => item.prompt,
  contaminationText: (item) => item.prompt,
  judgeRubric: (item) => item.rubric,
  failedChecks: failedCustomChecks,

  async evaluate(item, context) {
    const answer = await askPrompt(item.prompt, context, {
      maxTokens: context.config.maxTokens,
      failedChecks: failedCustomChecks(item),
      nullWithoutChecks: true,
    });
    if (!answer.ok) return answer.result;
    const response = answer.response;
    const checks = item.checks.map((check) => ({
      name: check.instruction,
      strict: checkInstruction(check.instruction, check.kwargs, item.prompt, response, 'strict'),
      loose: checkInstruction(check.instruction, check.kwargs, item.prompt, response, 'loose'),
    }));
    const followedStrict = checks.every((check) => check.strict);
    const followedLoose = checks.every((check) => check.loose);
    return {
      ...context.base,
      response,
      status: 'ok',
      score: checks.length === 0 ? null : followedStrict ? 100 : 0,
      checks,
      ...(checks.length > 0 ? { followedStrict, followedLoose } : {}),
      latencyMs: answer.latencyMs,
      calls: 1,
      usage: answer.usage,
    };
  },

  outcomeScore: (result) => result.score,
  // Judge-only items have no rule score.
  comparable: (result) => result.score !== null,

  score(results, { samples, seed }) {
    const ruled = results.filter((result) => result.score !== null);
    const checks = ruled.flatMap((result) => result.checks);
    const share = (values: boolean[]) =>
      values.length === 0 ? null : (values.filter(Boolean).length / values.length) * 100;
    const breakdown: CustomBreakdown = {
      overall: ruled.length > 0 ? bootstrapMean(ruled.map(scoreOf), samples, seed) : null,
      instructionStrict: share(checks.map((check) => check.strict)),
      instructionLoose: share(checks.map((check) => check.loose)),
      promptLoose: share(ruled.map((result) => result.followedLoose ?? false)),
    };
    const metrics: Record<string, number> = {};
    if (breakdown.overall) metrics.custom = breakdown.overall.score;
    if (breakdown.instructionStrict !== null) metrics['custom.instruction_strict'] = breakdown.instructionStrict;
    if (breakdown.promptLoose !== null) metrics['custom.prompt_loose'] = breakdown.promptLoose;
    if (breakdown.instructionLoose !== null) metrics['custom.instruction_loose'] = breakdown.instructionLoose;
    return { breakdown, headline: breakdown.overall, metrics };
  },

  reportHtml({ labels, modelName, breakdownOf }) {
    return `<h2>Custom prompts (rule checks)</h2><table><tr><th></th><th>prompt strict</th><th>instruction strict</th><th>prompt loose</th><th>instruction loose</th></tr>${labels
      .map((label) => {
        const custom = breakdownOf(label);
        return `<tr><th>${escapeHtml(modelName(label))}</th><td>${fixed(custom?.overall?.score)}</td><td>${fixed(custom?.instructionStrict)}</td><td>${fixed(custom?.promptLoose)}</td><td>${fixed(custom?.instructionLoose)}</td></tr>`;
      })
      .join('')}</table>`;
  },

  /** The IFEval figures' names, over the rule-checked items. */
  lmEvalMetrics(breakdown, results) {
    const ruled = results.filter((result) => result.score !== null);
    const metrics = [];
    if (breakdown.overall)
      metrics.push({
        name: 'prompt_level_strict_acc',
        value: breakdown.overall.score / 100,
        stderr: meanStderr(ruled.map((result) => scoreOf(result) / 100)),
        higherIsBetter: true,
      });
    if (breakdown.instructionStrict !== null)
      metrics.push({
        name: 'inst_level_strict_acc',
        value: breakdown.instructionStrict / 100,
        stderr: 'N/A' as const,
        higherIsBetter: true,
      });
    if (breakdown.promptLoose !== null)
      metrics.push({
        name: 'prompt_level_loose_acc',
        value: breakdown.promptLoose / 100,
        stderr: meanStderr(ruled.map((result) => (result.followedLoose ? 1 : 0))),
        higherIsBetter: true,
      });
    if (breakdown.instructionLoose !== null)
      metrics.push({
        name: 'inst_level_loose_acc',
        value: breakdown.instructionLoose / 100,
        stderr: 'N/A' as const,
        higherIsBetter: true,
      });
    return metrics;
  },
});
