import { z } from 'zod';
import { chatMessageSchema, toolSpecSchema } from './messages';

export const TRAJECTORY_SCHEMA_VERSION = 1;

export const rewardSchema = z.object({
  /** Weighted total in [0, 1]. */
  total: z.number().min(0).max(1),
  /** Named components in [0, 1] (facts, tools, compliance, hooks, format, ...). */
  components: z.record(z.string(), z.number()),
  /** Human-readable reasons for lost points. */
  notes: z.array(z.string()).default([]),
});
export type Reward = z.infer<typeof rewardSchema>;

export const callRecordSchema = z.object({
  /** Index of the assistant message this call produced. */
  messageIndex: z.number().int().nonnegative(),
  startedAt: z.number(),
  queueMs: z.number().nonnegative(),
  ttftMs: z.number().nonnegative(),
  e2eMs: z.number().nonnegative(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  finishReason: z.string(),
  attempts: z.number().int().positive().default(1),
  /** Duration of the tool calls this assistant message asked for, ms (replayed as think time). */
  toolMs: z.number().nonnegative().default(0),
  /**
   * The generated tokens' logprobs as the endpoint reported them (chat completions asked with
   * `logprobs: true`, e.g. rl policies on chat endpoints); absent when not asked or not given.
   */
  logprobs: z.array(z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()).optional() })).optional(),
});
export type CallRecord = z.infer<typeof callRecordSchema>;

/** Malformed model output, recorded and judged rather than crashing the episode. */
export const toolCallIssueSchema = z.object({
  messageIndex: z.number().int().nonnegative(),
  toolCallId: z.string(),
  kind: z.enum(['invalid_json', 'unknown_tool', 'schema_violation', 'tool_error']),
  detail: z.string(),
});

export const trajectorySchema = z.object({
  schemaVersion: z.literal(TRAJECTORY_SCHEMA_VERSION),
  /** Deterministic id: hash of (task id, harness hash, sample index, seed). */
  id: z.string().min(1),
  taskId: z.string().min(1),
  category: z.string(),
  /** OpenAI messages, system prompt first; tool-call arguments as the JSON strings produced. */
  messages: z.array(chatMessageSchema).min(1),
  /** The tools list the model saw. */
  tools: z.array(toolSpecSchema),
  harness: z.object({
    id: z.string(),
    version: z.string(),
    hash: z.string(),
    /** Variant mapping hash when this trajectory was produced or rewritten under an HSA variant. */
    variantHash: z.string().optional(),
    families: z.array(z.string()).optional(),
  }),
  model: z.object({
    provider: z.string(),
    id: z.string(),
    sampling: z.record(z.string(), z.unknown()).default({}),
    /** True for simulation policies and random-weight models: never mistake them for a real model. */
    simulated: z.boolean().default(false),
  }),
  calls: z.array(callRecordSchema).default([]),
  issues: z.array(toolCallIssueSchema).default([]),
  status: z.enum(['ok', 'step_limit', 'model_error', 'timeout']),
  statusReason: z.string().optional(),
  reward: rewardSchema,
  sampleIndex: z.number().int().nonnegative().default(0),
  seed: z.string().optional(),
  /** Free-form lineage (source trajectory id for augmented records, etc.). */
  meta: z.record(z.string(), z.unknown()).default({}),
});
export type Trajectory = z.infer<typeof trajectorySchema>;
