import type { EvalModel } from './eval-contract';
import type { EvalResult } from './eval-part';
import type { EvalScores } from './eval-scores';
import type { LmEvalMetric } from './suites/eval-suite';
import { evalSuiteOf } from './suites/registry';
import { meanStderr } from './suites/suite-kit';

/**
 * One model's scores in lm-evaluation-harness's results-JSON shape (`lm-eval/<label>/results.json`),
 * so tooling that reads `results_*.json` of `lm_eval --output_path` reads ours: per task (suite)
 * `"<metric>,none"` values 0–1 with `"<metric>_stderr,none"` companions (a number, or "N/A" where
 * lm-eval has none: IFEval's instruction-level accuracies), `versions`, `n-shot`, `configs`,
 * `higher_is_better`, `n-samples`, `group_subtasks`, `config` and `model_name`. Left out: `samples`
 * (per-item records are in results/*.jsonl.gz), `date`, timings, `git_hash` and environment
 * fields (scores stay byte-identical for the same inputs and seed), `groups` (no task groups).
 * The filter is always `none`: answers are scored as given.
 */

export const LM_EVAL_RESULTS_SCHEMA_VERSION = 1;

/** What `lm_eval` writes, as far as it applies. */
export interface LmEvalResultsDocument {
  results: Record<string, Record<string, string | number>>;
  group_subtasks: Record<string, string[]>;
  configs: Record<string, Record<string, unknown>>;
  versions: Record<string, number>;
  'n-shot': Record<string, number>;
  higher_is_better: Record<string, Record<string, boolean>>;
  'n-samples': Record<string, { original: number; effective: number }>;
  config: Record<string, unknown>;
  model_name: string;
}

/** A suite without its own lm-eval metrics: `score`, the mean item outcome / 100 over its comparable items. */
function defaultMetrics(results: readonly EvalResult[]): LmEvalMetric[] {
  const suite = evalSuiteOf(results[0].suite);
  const values = results
    .filter((result) => suite.comparable?.(result) ?? true)
    .map((result) => suite.outcomeScore(result))
    .filter((value): value is number => value !== null)
    .map((value) => value / 100);
  if (values.length === 0) return [];
  return [
    {
      name: 'score',
      value: values.reduce((sum, value) => sum + value, 0) / values.length,
      stderr: meanStderr(values),
      higherIsBetter: true,
    },
  ];
}

/** `model_args` as lm-eval writes it: comma-separated key=value of the model config's plain fields. */
function modelArgsOf(config: Record<string, unknown>): string {
  const names: Record<string, string> = { model: 'model', baseUrl: 'base_url', modelDir: 'pretrained' };
  return Object.entries(names)
    .filter(([field]) => typeof config[field] === 'string')
    .map(([field, name]) => `${name}=${String(config[field])}`)
    .join(',');
}

/** The document for one model, or undefined when it has no scored suite. */
export function lmEvalResultsOf(
  scores: EvalScores,
  results: readonly EvalResult[],
  model: EvalModel,
): LmEvalResultsDocument | undefined {
  const own = scores.scores[model.label];
  if (!own) return undefined;
  const document: LmEvalResultsDocument = {
    results: {},
    group_subtasks: {},
    configs: {},
    versions: {},
    'n-shot': {},
    higher_is_better: {},
    'n-samples': {},
    config: {},
    model_name: scores.models.find((entry) => entry.label === model.label)?.modelId || model.label,
  };
  for (const name of Object.keys(scores.suites)) {
    const list = results.filter((result) => result.model === model.label && result.suite === name);
    if (list.length === 0) continue;
    const suite = evalSuiteOf(name);
    const breakdown = own[name];
    const metrics = suite.lmEvalMetrics ? suite.lmEvalMetrics(breakdown, list) : defaultMetrics(list);
    const row: Record<string, string | number> = { alias: name };
    for (const metric of metrics) {
      row[`${metric.name},none`] = metric.value;
      row[`${metric.name}_stderr,none`] = metric.stderr;
    }
    document.results[name] = row;
    document.group_subtasks[name] = [];
    const version = scores.suites[name]?.version ?? suite.version;
    const data = scores.suites[name]?.data;
    document.configs[name] = {
      task: name,
      output_type: 'generate_until',
      num_fewshot: 0,
      generation_kwargs: { ...model.sampling },
      metric_list: metrics.map((metric) => ({
        metric: metric.name,
        aggregation: 'mean',
        higher_is_better: metric.higherIsBetter,
      })),
      metadata: { version, ...(data ? { data_source: data.source, data_sha256: data.sha256 } : {}) },
    };
    document.versions[name] = version;
    document['n-shot'][name] = 0;
    document.higher_is_better[name] = Object.fromEntries(metrics.map((metric) => [metric.name, metric.higherIsBetter]));
    document['n-samples'][name] = { original: scores.suites[name]?.items ?? list.length, effective: list.length };
  }
  if (Object.keys(document.results).length === 0) return undefined;
  const config = model.model as Record<string, unknown>;
  document.config = {
    model: String(config.adapter),
    model_args: modelArgsOf(config),
    gen_kwargs: { ...model.sampling },
  };
  return document;
}
