import { errorCodeOf } from '../errors';
import type { Harness } from '../harness/harness-types';
import { harnessHash } from '../harness/harness-hash';
import { renderHarnessShared, renderHookInjections, type RenderContext, type RenderedHarness } from '../harness/render';
import { shortHash } from '../hash/hash';
import type { ModelClient, SamplingSettings } from '../models/model-client';
import type { AssistantMessage, ChatMessage, ToolCall } from '../trajectory/messages';
import { TRAJECTORY_SCHEMA_VERSION, type CallRecord, type Trajectory } from '../trajectory/trajectory';
import { renderContextOf } from './room-context';
import type { Task } from './tasks/task-schema';
import { executeToolCall } from './tools/execute-tool-call';
import { verifyEpisode, type RewardWeights } from './verifier/verify-episode';
import { taskViewer, type Viewer } from './viewer/viewer';
import { createWorld, type World } from './world/world';

/**
 * Time as an episode sees it. The default is simulated (starts at the task's scene time and
 * moves by model and tool latencies), so trajectories are byte-identical under a seed; pass a
 * wall clock to stamp real time instead.
 */
export interface EpisodeClock {
  now(): number;
  /** Called with each model call's and tool batch's latency; a wall clock ignores it. */
  advance(ms: number): void;
}

export function simulatedClock(startMs: number): EpisodeClock {
  let now = startMs;
  return {
    now: () => now,
    advance: (ms) => {
      now += ms;
    },
  };
}

export const wallClock: EpisodeClock = { now: () => Date.now(), advance: () => undefined };

export interface RunEpisodeOptions {
  policy: ModelClient;
  harness: Harness;
  task: Task;
  /** The task's world; built from `task.room` when absent (pass one to reuse it across episodes). */
  world?: World;
  /** Model calls allowed per viewer turn before the episode stops with status step_limit. Default 6. */
  maxSteps?: number;
  /** Who speaks the follow-ups. Default: the task's own wording. */
  viewer?: Viewer;
  /** Viewer turns to play. Default: all of the task's turns. */
  maxTurns?: number;
  clock?: EpisodeClock;
  /** Sampling settings sent with every call (merged over the policy's defaults in the record). */
  sampling?: SamplingSettings;
  sampleIndex?: number;
  seed?: string;
  rewardWeights?: Partial<RewardWeights>;
  /** Set when the harness is an HSA variant. */
  variant?: { hash: string; families?: string[] };
  /** Precomputed harness hash (saves hashing the harness per episode). */
  harnessHash?: string;
  /** Aborting ends the episode with status timeout. */
  signal?: AbortSignal;
  meta?: Record<string, unknown>;
}

type Issue = Trajectory['issues'][number];

interface PreparedHarness {
  rendered: RenderedHarness;
  sessionStart: ReturnType<typeof renderHookInjections>;
  userMessage: ReturnType<typeof renderHookInjections>;
  beforeReply: ReturnType<typeof renderHookInjections>;
  afterToolResult: ReturnType<typeof renderHookInjections>;
}

/**
 * Rendered prompts and hook texts per harness object and room context, least recently used
 * dropped first. RL plays G episodes per (task, variant) and rendering costs more than a whole
 * step of the loop, so it is done once; the bound (about 10 KB an entry) keeps a long run's
 * memory flat. Harnesses are treated as immutable, and so are the rendered tools lists that
 * trajectories of one harness share.
 */
const preparedCache = new WeakMap<Harness, Map<string, PreparedHarness>>();
const preparedPerHarness = 1024;

function prepare(harness: Harness, context: RenderContext): PreparedHarness {
  let byContext = preparedCache.get(harness);
  if (byContext === undefined) {
    byContext = new Map();
    preparedCache.set(harness, byContext);
  }
  const key = JSON.stringify([
    context.campaignActive,
    context.activeCoupon,
    context.featuredItem,
    context.campaign,
    context.roomContext,
  ]);
  let prepared = byContext.get(key);
  if (prepared !== undefined) {
    byContext.delete(key);
  } else {
    prepared = {
      rendered: renderHarnessShared(harness, context),
      sessionStart: renderHookInjections(harness, 'session_start', context),
      userMessage: renderHookInjections(harness, 'user_message', context),
      beforeReply: renderHookInjections(harness, 'before_reply', context),
      afterToolResult: renderHookInjections(harness, 'after_tool_result', context),
    };
    if (byContext.size >= preparedPerHarness) byContext.delete(byContext.keys().next().value as string);
  }
  byContext.set(key, prepared);
  return prepared;
}

function joinSuffix(text: string, suffix: string): string {
  if (suffix === '') return text;
  return suffix.startsWith('\n') ? `${text}${suffix}` : `${text}\n${suffix}`;
}

/** Tool-call ids as the model sent them, made present and unique (tool messages must point at one call). */
function sanitizeToolCalls(calls: ToolCall[], messageIndex: number): ToolCall[] {
  const seen = new Set<string>();
  return calls.map((call, index) => {
    let id = typeof call.id === 'string' && call.id !== '' ? call.id : `call-${messageIndex}-${index}`;
    if (seen.has(id)) id = `${id}-${messageIndex}-${index}`;
    seen.add(id);
    return {
      id,
      type: 'function',
      function: {
        name: String(call.function?.name ?? ''),
        arguments:
          typeof call.function?.arguments === 'string'
            ? call.function.arguments
            : JSON.stringify(call.function?.arguments ?? {}),
      },
    };
  });
}

/**
 * Plays one task under one harness with one policy and returns the trajectory: the harness is
 * rendered for the task's room, hooks inject at their events (session_start, user_message,
 * before_reply, after_tool_result), each viewer turn runs model calls until a reply (tool calls,
 * including parallel ones, execute through the harness bindings), malformed calls are recorded
 * as issues and answered with a tool error, and the verifier scores the result. Never throws
 * for model misbehaviour or model errors: those end in the trajectory's status.
 */
export async function runEpisode(options: RunEpisodeOptions): Promise<Trajectory> {
  const { policy, harness, task } = options;
  const world = options.world ?? createWorld(task.room);
  const maxSteps = options.maxSteps ?? 6;
  const turnCount = Math.max(1, Math.min(options.maxTurns ?? task.turns.length, task.turns.length));
  const viewer = options.viewer ?? taskViewer;
  const clock = options.clock ?? simulatedClock(Date.parse(task.room.now));
  const startedAt = clock.now();

  const { rendered, sessionStart, userMessage, beforeReply, afterToolResult } = prepare(
    harness,
    renderContextOf(world),
  );

  const messages: ChatMessage[] = [{ role: 'system', content: rendered.systemPrompt }];
  for (const content of sessionStart.systemMessages) messages.push({ role: 'system', content });
  const calls: CallRecord[] = [];
  const issues: Issue[] = [];
  const viewerSources: string[] = [];
  let status: Trajectory['status'] = 'ok';
  let statusReason: string | undefined;
  let modelMs = 0;
  let toolMs = 0;

  turns: for (let turnIndex = 0; turnIndex < turnCount; turnIndex++) {
    let text = task.turns[turnIndex].message;
    if (turnIndex > 0) {
      const said = await viewer.nextMessage({ task, turnIndex, messages, world });
      text = said.text;
      viewerSources.push(said.source);
    }
    const suffix = (turnIndex === 0 ? sessionStart.userSuffix : '') + userMessage.userSuffix + beforeReply.userSuffix;
    messages.push({ role: 'user', content: joinSuffix(text, suffix) });
    for (const content of userMessage.systemMessages) messages.push({ role: 'system', content });
    for (const content of beforeReply.systemMessages) messages.push({ role: 'system', content });

    for (let step = 0; ; step++) {
      if (step >= maxSteps) {
        status = 'step_limit';
        statusReason = `no reply after ${maxSteps} model calls in turn ${turnIndex + 1}`;
        break turns;
      }
      let response;
      try {
        response = await policy.chat({ ...options.sampling, messages, tools: rendered.tools, signal: options.signal });
      } catch (error) {
        const aborted = options.signal?.aborted === true;
        status = aborted ? 'timeout' : 'model_error';
        const message = error instanceof Error ? error.message : String(error);
        statusReason = errorCodeOf(error) !== undefined || aborted ? message : `[MODEL_ERROR] ${message}`;
        break turns;
      }
      const messageIndex = messages.length;
      const toolCalls =
        response.message.tool_calls !== undefined && response.message.tool_calls.length > 0
          ? sanitizeToolCalls(response.message.tool_calls, messageIndex)
          : undefined;
      const assistant: AssistantMessage = { role: 'assistant', content: response.message.content ?? null };
      if (toolCalls !== undefined) assistant.tool_calls = toolCalls;
      if (response.message.reasoning_content !== undefined)
        assistant.reasoning_content = response.message.reasoning_content;
      messages.push(assistant);
      const { timings, usage } = response;
      const record: CallRecord = {
        messageIndex,
        startedAt: timings.startedAt,
        queueMs: timings.queueMs,
        ttftMs: timings.ttftMs,
        e2eMs: timings.e2eMs,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        finishReason: response.finishReason,
        attempts: response.attempts,
        toolMs: 0,
        ...(response.logprobs && response.logprobs.length > 0
          ? {
              logprobs: response.logprobs.map(({ token, logprob, bytes }) =>
                bytes ? { token, logprob, bytes } : { token, logprob },
              ),
            }
          : {}),
      };
      calls.push(record);
      modelMs += timings.e2eMs;
      clock.advance(timings.queueMs + timings.e2eMs);
      if (toolCalls === undefined) continue turns;

      // Parallel calls run at once: the batch takes as long as its slowest call.
      let batchMs = 0;
      for (const call of toolCalls) {
        const execution = executeToolCall(world, harness, call);
        messages.push({ role: 'tool', tool_call_id: call.id, content: execution.content });
        if (execution.issueKind !== undefined)
          issues.push({
            messageIndex,
            toolCallId: call.id,
            kind: execution.issueKind,
            detail: execution.error?.message ?? '',
          });
        if (execution.durationMs > batchMs) batchMs = execution.durationMs;
      }
      record.toolMs = batchMs;
      toolMs += batchMs;
      clock.advance(batchMs);
      if (afterToolResult.userSuffix !== '') {
        const last = messages[messages.length - 1] as { content: string };
        last.content = joinSuffix(last.content, afterToolResult.userSuffix);
      }
      for (const content of afterToolResult.systemMessages) messages.push({ role: 'system', content });
    }
  }

  const hash = options.harnessHash ?? harnessHash(harness);
  const reward = verifyEpisode({ task, harness, messages, turnCount, weights: options.rewardWeights, world });
  const sampleIndex = options.sampleIndex ?? 0;
  const trajectory: Trajectory = {
    schemaVersion: TRAJECTORY_SCHEMA_VERSION,
    id: `traj-${shortHash({ taskId: task.id, harness: hash, variant: options.variant?.hash, sampleIndex, seed: options.seed, policy: policy.modelId }, 16)}`,
    taskId: task.id,
    category: task.category,
    messages,
    tools: rendered.tools,
    harness: {
      id: harness.id,
      version: harness.version,
      hash,
      ...(options.variant !== undefined
        ? {
            variantHash: options.variant.hash,
            ...(options.variant.families !== undefined ? { families: options.variant.families } : {}),
          }
        : {}),
    },
    model: {
      provider: policy.provider,
      id: policy.modelId,
      sampling: { ...policy.sampling, ...options.sampling },
      simulated: policy.simulated ?? false,
    },
    calls,
    issues,
    status,
    ...(statusReason !== undefined ? { statusReason } : {}),
    reward,
    sampleIndex,
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    meta: {
      ...options.meta,
      session: { startedAt, endedAt: clock.now(), modelMs, toolMs, turns: turnCount },
      ...(viewerSources.length > 0 ? { viewer: { kind: viewer.kind, sources: viewerSources } } : {}),
    },
  };
  return trajectory;
}
