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
  logprobs: z
    .array(z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()).optional() }))
    .optional(),
});
export type CallRecord = z.infer<typeof callRecordSchema>;

/** Malformed model output, recorded and judged rather than crashing the episode. */
export const toolCallIssueSchema = z.object({
  messageIndex: z.number().int().nonnegative(),
  toolCallId: z.string(),
  kind: z.enum(['invalid_json', 'unknown_tool', 'schema_violation', 'tool_error']),
  detail: z.string(),
});

/**
 * What the stages write under `meta` (each key optional; other keys, e.g. from imported production
 * logs, are kept as they are).
 */
export const trajectoryMetaSchema = z.looseObject({
  /** The agent loop's timing of the episode (simulator sessions). */
  session: z
    .looseObject({
      startedAt: z.number(),
      endedAt: z.number(),
      /** Time spent in model calls, ms. */
      modelMs: z.number(),
      /** Time spent in tool calls, ms. */
      toolMs: z.number(),
      /** Viewer turns played. */
      turns: z.number(),
    })
    .optional(),
  /** Where viewer follow-ups came from (simulated viewer model). */
  viewer: z.looseObject({ kind: z.string(), sources: z.array(z.string()) }).optional(),
  /** collect: why a sample was not kept (rejected trajectories only). */
  rejection: z.looseObject({ reason: z.string(), detail: z.string().optional() }).optional(),
  /** augment: the variant the trajectory was rewritten into. */
  augment: z
    .looseObject({ variantHash: z.string(), families: z.array(z.string()), replayChecked: z.boolean() })
    .optional(),
  /** augment: the trajectory this one was rewritten from, and that trajectory's harness hash. */
  sourceTrajectoryId: z.string().optional(),
  sourceHarnessHash: z.string().optional(),
  /** rl: the episode group. */
  groupIndex: z.number().int().optional(),
  /** Room state the system prompt was rendered with (imported logs); augment re-renders with it. */
  renderContext: z.unknown().optional(),
});
export type TrajectoryMeta = z.infer<typeof trajectoryMetaSchema>;

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
  /**
   * Lineage and per-stage details, checked against trajectoryMetaSchema but kept as written: key
   * order is part of the bytes a stage writes, and a parse in schema order would change it.
   */
  meta: z
    .record(z.string(), z.unknown())
    .default({})
    .superRefine((value, context) => {
      const result = trajectoryMetaSchema.safeParse(value);
      if (!result.success)
        for (const issue of result.error.issues)
          context.addIssue({ code: 'custom', message: issue.message, path: issue.path });
    })
    .transform((value) => value as TrajectoryMeta),
});
export type Trajectory = z.infer<typeof trajectorySchema>;
