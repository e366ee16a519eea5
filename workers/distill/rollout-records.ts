import type { ParquetColumn } from '../../shared/artifacts/parquet-codec';
import type { CompletionScores } from '../../shared/models/scoring/token-scorer';

/** Schema version of rollout records (Parquet footer `schema_version`, manifest entries). */
export const DISTILL_ROLLOUT_SCHEMA_VERSION = 1;

/**
 * One distillation rollout: a student sample and the teacher's view of its tokens, in the field
 * names trainers read (slime's `Sample`: `rollout_log_probs`, `teacher_log_probs`, `loss_mask`).
 * Per-token lists are aligned with `response_ids`; float lists hold float32 values (as stored in
 * Parquet), so JSONL and Parquet carry the same numbers.
 */
export interface RolloutRecord {
  /** Prompt set label. */
  source: string;
  prompt_id: string;
  /** 0-based index of this sample among the prompt's samples. */
  sample_index: number;
  /** Seed the student sampled this completion with. */
  seed: string;
  /** Chat-templated prompt (generation prompt included), tokenized by the student's tokenizer. */
  prompt_ids: number[];
  /** The student's completion, as sampled (an end-of-turn token included when it stopped on one). */
  response_ids: number[];
  /** Over `response_ids`: 1 on every sampled token (all of them are trained on). */
  loss_mask: number[];
  /** Student logprob of each response token at `student_logprob_temperature`. */
  rollout_log_probs: number[];
  /** Teacher logprob of the same token ids at `teacher_logprob_temperature`. */
  teacher_log_probs: number[];
  /** Per token: rollout_log_probs - teacher_log_probs (sampled-token estimate of KL(student || teacher)). */
  reverse_kl: number[];
  /** Teacher alternatives per response token (0 = none recorded). */
  teacher_top_k: number;
  /**
   * Row-major [response_length × teacher_top_k]: ids of the teacher's most likely tokens at each
   * position, best first; padded with id -1 (logprob -1e30) where a server returned fewer.
   */
  teacher_top_ids: number[];
  /** Same layout: their teacher logprobs. */
  teacher_top_log_probs: number[];
  prompt_length: number;
  response_length: number;
  /** `stop` (an end-of-turn token) or `length` (maxNewTokens reached). */
  finish_reason: 'stop' | 'length';
  /** Mean of `reverse_kl` over the response. */
  mean_reverse_kl: number;
  /** The response decoded (special tokens kept), for people reading the JSONL. */
  response_text: string;
  student_logprob_temperature: number;
  teacher_logprob_temperature: number;
  /** Fingerprint of the tokenizer both sides share. */
  tokenizer_fingerprint: string;
  student_model: string;
  teacher_model: string;
  /** Version of the student policy that sampled it (round k of an on-policy stage samples with version k; 1 otherwise). */
  policy_version: number;
  /** Where the student sampled: `onnx` (in-process), `vllm`, `sglang` or another adapter's server (token-id prompts). Always token-exact. */
  student_engine: string;
  /** True when the student or the teacher has random weights (a demo or test model): the numbers show the pipeline, not a model. */
  dummy_weights: boolean;
}

/** Parquet layout of rollout records: declared types, lists as three-level LISTs. */
export const rolloutColumns: ParquetColumn[] = [
  { name: 'source', type: 'STRING' },
  { name: 'prompt_id', type: 'STRING' },
  { name: 'sample_index', type: 'INT32' },
  { name: 'seed', type: 'STRING' },
  { name: 'prompt_ids', type: { list: 'INT32' } },
  { name: 'response_ids', type: { list: 'INT32' } },
  { name: 'loss_mask', type: { list: 'INT32' } },
  { name: 'rollout_log_probs', type: { list: 'FLOAT' } },
  { name: 'teacher_log_probs', type: { list: 'FLOAT' } },
  { name: 'reverse_kl', type: { list: 'FLOAT' } },
  { name: 'teacher_top_k', type: 'INT32' },
  { name: 'teacher_top_ids', type: { list: 'INT32' } },
  { name: 'teacher_top_log_probs', type: { list: 'FLOAT' } },
  { name: 'prompt_length', type: 'INT32' },
  { name: 'response_length', type: 'INT32' },
  { name: 'finish_reason', type: 'STRING' },
  { name: 'mean_reverse_kl', type: 'DOUBLE' },
  { name: 'response_text', type: 'STRING' },
  { name: 'student_logprob_temperature', type: 'DOUBLE' },
  { name: 'teacher_logprob_temperature', type: 'DOUBLE' },
  { name: 'tokenizer_fingerprint', type: 'STRING' },
  { name: 'student_model', type: 'STRING' },
  { name: 'teacher_model', type: 'STRING' },
  { name: 'policy_version', type: 'INT32' },
  { name: 'student_engine', type: 'STRING' },
  { name: 'dummy_weights', type: 'BOOLEAN' },
];

export interface RolloutParts {
  source: string;
  promptId: string;
  sampleIndex: number;
  seed: string;
  promptIds: readonly number[];
  responseIds: readonly number[];
  finishReason: 'stop' | 'length';
  studentLogprobs: readonly number[];
  teacher: CompletionScores;
  teacherTopK: number;
  responseText: string;
  studentLogprobTemperature: number;
  teacherLogprobTemperature: number;
  tokenizerFingerprint: string;
  studentModel: string;
  teacherModel: string;
  policyVersion: number;
  studentEngine: string;
  dummyWeights: boolean;
}

/** Builds a record, rounding every per-token float to float32 first so every format holds the same value. */
export function buildRolloutRecord(parts: RolloutParts): RolloutRecord {
  const length = parts.responseIds.length;
  const student = parts.studentLogprobs.map((value) => Math.fround(value));
  const teacher = parts.teacher.logprobs.map((value) => Math.fround(value));
  if (student.length !== length || teacher.length !== length) {
    throw new Error(
      `rollout ${parts.source}/${parts.promptId}#${parts.sampleIndex}: ${length} response tokens but ${student.length} student and ${teacher.length} teacher logprobs`,
    );
  }
  const reverseKl = student.map((value, index) => Math.fround(value - teacher[index]));
  const topIds: number[] = [];
  const topLogprobs: number[] = [];
  if (parts.teacherTopK > 0) {
    for (let index = 0; index < length; index++) {
      const candidates = parts.teacher.top?.[index] ?? [];
      // -Infinity would not survive JSON: a padded slot gets a very low finite logprob.
      for (let rank = 0; rank < parts.teacherTopK; rank++) {
        const candidate = candidates[rank];
        topIds.push(candidate ? candidate.tokenId : -1);
        topLogprobs.push(candidate ? Math.fround(candidate.logprob) : Math.fround(-1e30));
      }
    }
  }
  return {
    source: parts.source,
    prompt_id: parts.promptId,
    sample_index: parts.sampleIndex,
    seed: parts.seed,
    prompt_ids: [...parts.promptIds],
    response_ids: [...parts.responseIds],
    loss_mask: new Array<number>(length).fill(1),
    rollout_log_probs: student,
    teacher_log_probs: teacher,
    reverse_kl: reverseKl,
    teacher_top_k: parts.teacherTopK,
    teacher_top_ids: topIds,
    teacher_top_log_probs: topLogprobs,
    prompt_length: parts.promptIds.length,
    response_length: length,
    finish_reason: parts.finishReason,
    mean_reverse_kl: length > 0 ? reverseKl.reduce((sum, value) => sum + value, 0) / length : 0,
    response_text: parts.responseText,
    student_logprob_temperature: parts.studentLogprobTemperature,
    teacher_logprob_temperature: parts.teacherLogprobTemperature,
    tokenizer_fingerprint: parts.tokenizerFingerprint,
    student_model: parts.studentModel,
    teacher_model: parts.teacherModel,
    policy_version: parts.policyVersion,
    student_engine: parts.studentEngine,
    dummy_weights: parts.dummyWeights,
  };
}
