import type { ParquetColumn } from '../../shared/artifacts/parquet-codec';
import type { TokenExactEpisodeView } from '../../shared/models/token-exact/token-exact-episode';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import { stringifyJsonKeepingFloats } from '../../shared/text/python-values';
import { tokenizeConversation } from '../../shared/text/tokenize-conversation';
import type { ChatMessage } from '../../shared/trajectory/messages';
import type { Trajectory } from '../../shared/trajectory/trajectory';
import type { GroupHarness } from './group-harness';
import type { ChatLogprobsMetadata } from './chat-policy-logprobs';

/** Schema version of episode records (Parquet footer `schema_version`, manifest entries). */
export const RL_EPISODE_SCHEMA_VERSION = 1;

/**
 * Status of an episode record: the episode's own (`ok`, `step_limit`, `model_error`, `timeout`)
 * or `mask_failed` when a scored episode's token view could not be built and verified (then
 * `tokens` and `loss_mask` are empty).
 */
export type EpisodeStatus = Trajectory['status'] | 'mask_failed';

/**
 * One episode as RL trainers read it, in slime `Sample` field names (`group_index`, `index`,
 * `prompt`, `tokens`, `response`, `response_length`, `loss_mask`, `reward`, `status`,
 * `metadata`) plus the GRPO `advantage` and flat columns to group by.
 *
 * `tokens` is the whole conversation rendered by the target model's chat template; the first
 * `prompt_length` tokens are the prompt (up to and including the first assistant header),
 * `loss_mask` covers the remaining `response_length` tokens: 1 on the policy's own tokens
 * (content, tool-call text, end-of-turn token), 0 on every environment token (tool results,
 * viewer follow-ups, hook injections, later assistant headers). Episodes the endpoint failed on
 * (model_error, timeout) keep their tokens with an all-zero mask and advantage 0, so a trainer
 * that ignores `status` still learns nothing from them.
 */
export interface EpisodeRecord {
  group_index: number;
  /** group_index * G + sample_index: stable, whichever groups were dropped. */
  index: number;
  sample_index: number;
  /** The prompt messages (before the first assistant turn) as a JSON string of OpenAI messages. */
  prompt: string;
  /** The tools list the policy saw (JSON string: variants differ in schema). */
  tools: string;
  /** The whole conversation (JSON string of OpenAI messages). */
  messages: string;
  /** The rendered text of the response part of `tokens`. */
  response: string;
  tokens: number[];
  prompt_length: number;
  response_length: number;
  loss_mask: number[];
  reward: number;
  advantage: number;
  status: EpisodeStatus;
  /** Why the status is not ok (`[CODE] message`), else null. */
  status_reason: string | null;
  task_id: string;
  task_category: string;
  /** Content hash of the harness the episode ran under. */
  harness_hash: string;
  /** HSA variant hash; null under the canonical harness. */
  variant_hash: string | null;
  /** HSA families the variant applied (empty under the canonical harness). */
  harness_families: string[];
  canonical_harness: boolean;
  /** The verifier's named components, each in [0, 1]. */
  reward_components: Record<string, number>;
  /** Version of the policy that played it (round k of an on-policy stage plays with version k; 1 otherwise). */
  policy_version: number;
  metadata: Record<string, unknown>;
  /**
   * Model policies only: true when `tokens` are the ids as sampled from a served policy
   * (token-exact), false when they are the conversation re-tokenized (chat endpoints).
   */
  token_exact?: boolean;
  /**
   * Token-exact policies only, aligned with the response part of `tokens` (like `loss_mask`): the
   * rollout logprob of each sampled id (of `metadata.token_exact.logprob_distribution`), 0 on
   * environment tokens.
   */
  rollout_log_probs?: number[];
}

/** How a policy's records are built: scripted simulation, a chat endpoint (re-tokenized), or served token-exact. */
export type PolicyKind = 'scripted' | 'chat' | 'token-exact';

export const episodeColumns: ParquetColumn[] = [
  { name: 'group_index', type: 'INT32' },
  { name: 'index', type: 'INT64' },
  { name: 'sample_index', type: 'INT32' },
  { name: 'prompt', type: 'STRING' },
  { name: 'tools', type: 'STRING' },
  { name: 'messages', type: 'STRING' },
  { name: 'response', type: 'STRING' },
  { name: 'tokens', type: { list: 'INT32' } },
  { name: 'prompt_length', type: 'INT32' },
  { name: 'response_length', type: 'INT32' },
  { name: 'loss_mask', type: { list: 'INT32' } },
  { name: 'reward', type: 'DOUBLE' },
  { name: 'advantage', type: 'DOUBLE' },
  { name: 'status', type: 'STRING' },
  { name: 'status_reason', type: 'STRING', nullable: true },
  { name: 'task_id', type: 'STRING' },
  { name: 'task_category', type: 'STRING' },
  { name: 'harness_hash', type: 'STRING' },
  { name: 'variant_hash', type: 'STRING', nullable: true },
  { name: 'harness_families', type: { list: 'STRING' } },
  { name: 'canonical_harness', type: 'BOOLEAN' },
  { name: 'reward_components', type: 'JSON' },
  { name: 'policy_version', type: 'INT32' },
  { name: 'metadata', type: 'JSON' },
];

/** The columns of a policy kind's records: existing layouts unchanged, model policies say whether they are token-exact. */
export function episodeColumnsFor(kind: PolicyKind): ParquetColumn[] {
  if (kind === 'scripted') return episodeColumns;
  if (kind === 'chat') return [...episodeColumns, { name: 'token_exact', type: 'BOOLEAN' }];
  return [
    ...episodeColumns,
    { name: 'token_exact', type: 'BOOLEAN' },
    { name: 'rollout_log_probs', type: { list: 'FLOAT' } },
  ];
}

/**
 * Templates that print the date (Llama's `strftime_now`) get this fixed moment, so the same
 * episode always gives the same token ids.
 */
export const renderMoment = new Date('2025-01-01T00:00:00Z');

export type TokenView =
  | {
      ok: true;
      tokens: number[];
      promptLength: number;
      lossMask: number[];
      response: string;
      trained: number;
      /** Hook system messages folded into turns for this template (normalizeHookMessages). */
      foldedHookMessages: number;
      /** Served-prompt characters trained in merged first tokens (thinking templates). */
      mergedPromptChars: number;
    }
  | { ok: false; code: string; reason: string };

/**
 * The token view of an episode by the target model's tokenizer and chat template, as the shard
 * stage builds SFT samples (every assistant turn trained): the whole conversation rendered,
 * tokenized, and masked, each masked span checked to decode back to its assistant turn.
 */
export function episodeTokenView(
  tokenizer: ChatTokenizer,
  trajectory: Pick<Trajectory, 'messages' | 'tools'>,
  enableThinking?: boolean,
): TokenView {
  const result = tokenizeConversation(tokenizer, trajectory.messages, trajectory.tools, {
    trainOn: 'all',
    now: renderMoment,
    ...(enableThinking === undefined ? {} : { enableThinking }),
  });
  if (!result.ok) return { ok: false, code: result.code, reason: result.reason };
  const { sample } = result;
  const first = sample.assistantSpans[0];
  return {
    ok: true,
    tokens: sample.inputIds,
    promptLength: first.tokenStart,
    lossMask: sample.lossMask.slice(first.tokenStart),
    response: sample.text.slice(first.start),
    trained: sample.lossMask.reduce((sum, bit) => sum + bit, 0),
    foldedHookMessages: sample.hookMessages.folded,
    mergedPromptChars: sample.assistantSpans.reduce((sum, span) => sum + (span.mergedPromptChars ?? 0), 0),
  };
}

/**
 * The token view of a token-exact episode: the ids as sampled (prompt + sampled ids +
 * environment ids), the mask over sampled ids only. Never re-rendered: where a fresh render
 * differs, the drift is counted and these ids are kept, because they are what the policy saw and
 * produced.
 */
export function sampledTokenView(tokenizer: ChatTokenizer, sampled: TokenExactEpisodeView): TokenView {
  const { tokens, promptLength, lossMask } = sampled;
  return {
    ok: true,
    tokens,
    promptLength,
    lossMask: lossMask.slice(promptLength),
    response: tokenizer.decode(tokens.slice(promptLength)),
    trained: lossMask.reduce((sum, bit) => sum + bit, 0),
    // Merge of main's hook folding: these ids are not re-rendered here, so no folding is counted for them.
    foldedHookMessages: 0,
    mergedPromptChars: 0,
  };
}

/** The messages before the first assistant turn. */
export function promptMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  const first = messages.findIndex((message) => message.role === 'assistant');
  return first === -1 ? [...messages] : messages.slice(0, first);
}

/** Whether an episode's reward judges the policy (it enters its group's statistics). */
export function isScored(status: Trajectory['status']): boolean {
  return status === 'ok' || status === 'step_limit';
}

export interface EpisodeRecordInput {
  trajectory: Trajectory;
  view: TokenView;
  groupIndex: number;
  groupSize: number;
  groupHarness: GroupHarness;
  advantage: number;
  /** The sampling seed the episode's policy calls carried. */
  samplingSeed: number;
  group: { mean: number; std: number; scored: number; zeroVariance: boolean };
  tokenizerFingerprint: string;
  policyVersion: number;
  /** Default `scripted` (the original layout). */
  policyKind?: PolicyKind;
  /** Token-exact policies: the episode as sampled. */
  sampled?: TokenExactEpisodeView;
  /** Token-exact policies: the tool-call parser that read the turns. */
  toolCallParser?: string;
  /** Chat-completions policies: the logprobs the endpoint gave per assistant turn. */
  chatLogprobs?: ChatLogprobsMetadata;
}

export function buildEpisodeRecord(input: EpisodeRecordInput): EpisodeRecord {
  const { trajectory, view, groupHarness } = input;
  const scored = isScored(trajectory.status);
  const status: EpisodeStatus = scored && !view.ok ? 'mask_failed' : trajectory.status;
  const statusReason =
    status === 'mask_failed' && !view.ok ? `[${view.code}] ${view.reason}` : (trajectory.statusReason ?? null);
  const tokens = view.ok ? view.tokens : [];
  const lossMask = view.ok ? (scored ? view.lossMask : view.lossMask.map(() => 0)) : [];
  const sampled = input.sampled;
  const issueKinds: Record<string, number> = {};
  for (const issue of trajectory.issues) issueKinds[issue.kind] = (issueKinds[issue.kind] ?? 0) + 1;
  return {
    group_index: input.groupIndex,
    index: input.groupIndex * input.groupSize + trajectory.sampleIndex,
    sample_index: trajectory.sampleIndex,
    prompt: JSON.stringify(promptMessages(trajectory.messages)),
    // A schema's `1.0` stays a float for the trainer's json.loads, as the episode's rendering printed it.
    tools: stringifyJsonKeepingFloats(trajectory.tools),
    messages: JSON.stringify(trajectory.messages),
    response: view.ok ? view.response : '',
    tokens,
    prompt_length: view.ok ? view.promptLength : 0,
    response_length: tokens.length - (view.ok ? view.promptLength : 0),
    loss_mask: lossMask,
    reward: trajectory.reward.total,
    advantage: input.advantage,
    status,
    status_reason: status === 'ok' ? null : statusReason,
    task_id: trajectory.taskId,
    task_category: trajectory.category,
    harness_hash: groupHarness.hash,
    variant_hash: groupHarness.variant?.hash ?? null,
    harness_families: groupHarness.variant?.families ?? [],
    canonical_harness: groupHarness.canonical,
    reward_components: trajectory.reward.components,
    policy_version: input.policyVersion,
    metadata: {
      trajectory_id: trajectory.id,
      task_id: trajectory.taskId,
      task_category: trajectory.category,
      harness: { ...trajectory.harness, canonical: groupHarness.canonical },
      reward: trajectory.reward,
      episode_status: trajectory.status,
      ...(trajectory.statusReason !== undefined ? { episode_status_reason: trajectory.statusReason } : {}),
      token_view: view.ok
        ? {
            ok: true,
            trained_tokens: view.trained,
            ...(view.foldedHookMessages > 0 ? { folded_hook_messages: view.foldedHookMessages } : {}),
            ...(view.mergedPromptChars > 0 ? { merged_prompt_chars: view.mergedPromptChars } : {}),
          }
        : { ok: false, code: view.code, reason: view.reason },
      tokenizer_fingerprint: input.tokenizerFingerprint,
      seed: trajectory.seed ?? null,
      sampling_seed: input.samplingSeed,
      policy: trajectory.model,
      steps: trajectory.calls.length,
      tool_call_issues: issueKinds,
      group: input.group,
      ...(trajectory.meta.viewer !== undefined ? { viewer: trajectory.meta.viewer } : {}),
      ...(sampled ? { token_exact: tokenExactMetadata(sampled, input.toolCallParser) } : {}),
      ...(input.chatLogprobs ? { chat_logprobs: input.chatLogprobs } : {}),
    },
    ...(input.policyKind === 'chat' ? { token_exact: false } : {}),
    ...(input.policyKind === 'token-exact'
      ? {
          token_exact: sampled !== undefined,
          rollout_log_probs: sampled
            ? sampled.rolloutLogprobs.slice(sampled.promptLength).map((value) => Math.fround(value))
            : [],
        }
      : {}),
  };
}

/**
 * Per assistant turn as sampled: `prompt_length` (its prompt ids are `tokens[0 : prompt_length]`,
 * the sequence only grows), sampled ids, rollout logprobs, finish reason, seed, tool calls read and
 * malformed tool-call text; plus the logprobs' distribution and the drift against a fresh render.
 */
function tokenExactMetadata(
  sampled: TokenExactEpisodeView,
  toolCallParser: string | undefined,
): Record<string, unknown> {
  return {
    logprob_distribution: sampled.distribution,
    tool_call_parser: toolCallParser ?? null,
    drift: {
      checked: sampled.drift.checked,
      drifted: sampled.drift.drifted,
      first_difference: sampled.drift.firstDifference,
      tokens: sampled.drift.tokens,
      ...(sampled.drift.reason ? { reason: sampled.drift.reason } : {}),
    },
    turns: sampled.turns.map((turn) => ({
      prompt_length: turn.promptLength,
      sampled_ids: turn.sampledIds,
      rollout_log_probs: turn.logprobs.map((value) => Math.fround(value)),
      finish_reason: turn.finishReason,
      seed: turn.seed,
      tool_calls: turn.toolCalls,
      malformed: turn.malformed,
    })),
  };
}
