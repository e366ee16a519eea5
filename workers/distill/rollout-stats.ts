import type { DistillModelsSummary, SourceTotals } from './distill-contract';
import type { RolloutRecord } from './rollout-records';

/** Schema version of `stats.json`. */
export const DISTILL_STATS_SCHEMA_VERSION = 1;

export function emptyTotals(): SourceTotals {
  return {
    prompts: 0,
    samples: 0,
    promptTokens: 0,
    responseTokens: 0,
    reverseKlSum: 0,
    sequenceReverseKlSum: 0,
    studentLogprobSum: 0,
    teacherLogprobSum: 0,
    finishedByStop: 0,
    finishedByLength: 0,
  };
}

/** Adds one record to its source's totals (a prompt counts once, at sample 0). */
export function addRecord(totals: SourceTotals, record: RolloutRecord): void {
  if (record.sample_index === 0) totals.prompts++;
  totals.samples++;
  totals.promptTokens += record.prompt_length;
  totals.responseTokens += record.response_length;
  for (let index = 0; index < record.response_length; index++) {
    totals.reverseKlSum += record.reverse_kl[index];
    totals.studentLogprobSum += record.rollout_log_probs[index];
    totals.teacherLogprobSum += record.teacher_log_probs[index];
  }
  totals.sequenceReverseKlSum += record.mean_reverse_kl;
  if (record.finish_reason === 'stop') totals.finishedByStop++;
  else totals.finishedByLength++;
}

/** Sums totals into `into`. */
export function addTotals(into: SourceTotals, totals: SourceTotals): void {
  for (const key of Object.keys(into) as Array<keyof SourceTotals>) into[key] += totals[key];
}

/** Means of a set of rollouts (per source or all). */
export interface RolloutSummary {
  prompts: number;
  samples: number;
  promptTokens: number;
  responseTokens: number;
  meanPromptLength: number;
  meanResponseLength: number;
  /** Token-weighted: mean of reverse_kl over every response token. */
  meanReverseKl: number;
  /** Mean over sequences of their mean reverse KL. */
  meanSequenceReverseKl: number;
  /** Mean student logprob per response token (at the student's logprob temperature). */
  meanStudentLogprob: number;
  /** Mean teacher logprob per response token. */
  meanTeacherLogprob: number;
  finishReasons: { stop: number; length: number };
}

export function summarize(totals: SourceTotals): RolloutSummary {
  const perToken = (sum: number) => (totals.responseTokens > 0 ? sum / totals.responseTokens : 0);
  const perSample = (sum: number) => (totals.samples > 0 ? sum / totals.samples : 0);
  return {
    prompts: totals.prompts,
    samples: totals.samples,
    promptTokens: totals.promptTokens,
    responseTokens: totals.responseTokens,
    meanPromptLength: perSample(totals.promptTokens),
    meanResponseLength: perSample(totals.responseTokens),
    meanReverseKl: perToken(totals.reverseKlSum),
    meanSequenceReverseKl: perSample(totals.sequenceReverseKlSum),
    meanStudentLogprob: perToken(totals.studentLogprobSum),
    meanTeacherLogprob: perToken(totals.teacherLogprobSum),
    finishReasons: { stop: totals.finishedByStop, length: totals.finishedByLength },
  };
}

/** `stats.json` of the stage (also the manifest's `stats`). */
export interface DistillStats {
  schemaVersion: number;
  /** True when the student or the teacher has random weights: these numbers say nothing about real models. */
  dummyWeights: boolean;
  models: DistillModelsSummary;
  sampling: {
    temperature: number;
    topP: number;
    topK: number;
    maxNewTokens: number;
    samplesPerPrompt: number;
    seed: string;
  };
  teacherTopK: number;
  global: RolloutSummary;
  sources: Record<string, RolloutSummary>;
}

/** Sums per-source totals over parts (sources in order of first appearance) into the stage's stats. */
export function buildStats(
  parts: ReadonlyArray<Record<string, SourceTotals>>,
  context: Omit<DistillStats, 'schemaVersion' | 'dummyWeights' | 'global' | 'sources'>,
): DistillStats {
  const bySource = new Map<string, SourceTotals>();
  const all = emptyTotals();
  for (const part of parts) {
    for (const [source, totals] of Object.entries(part)) {
      let sum = bySource.get(source);
      if (!sum) {
        sum = emptyTotals();
        bySource.set(source, sum);
      }
      addTotals(sum, totals);
      addTotals(all, totals);
    }
  }
  return {
    schemaVersion: DISTILL_STATS_SCHEMA_VERSION,
    dummyWeights: context.models.student.dummyWeights || context.models.teacher.dummyWeights,
    models: context.models,
    sampling: context.sampling,
    teacherTopK: context.teacherTopK,
    global: summarize(all),
    sources: Object.fromEntries([...bySource].map(([source, totals]) => [source, summarize(totals)])),
  };
}
