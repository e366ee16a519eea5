import { canonicalJson, shortHash } from '../../hash/hash';
import { toolArgumentLabel } from '../tool-binding';
import type { AssistantMessage, ChatMessage, ToolCall, ToolSpec } from '../../trajectory/messages';
import type { Trajectory } from '../../trajectory/trajectory';
import { harnessHash } from '../harness-hash';
import { capabilityArguments, type Harness, type ToolDefinition } from '../harness-types';
import { renderHarness, type RenderContext } from '../render';
import { TextRenamer } from './text-renamer';
import { mapArguments, type ArgumentMap } from './tool-layout';
import { identityRewrite, parseTimeline, rebuildTimeline, type Timeline } from './trajectory-timeline';
import type { Variant } from './variant-mapping';

/**
 * Rewrites a trajectory recorded under the canonical harness into the trajectory the model
 * would have produced under a variant: the system prompt and hook injections re-rendered from
 * the variant for the same room, the variant's tools list, every tool call's name, argument
 * paths and enum values moved through the mapping, tool results that echo names (errors naming
 * an argument or a tool) respelled, and replies left as they were unless they mention a renamed
 * tool or skill id.
 */

/** One tool call before and after the rewrite (for the checks). */
export interface RewrittenCall {
  original: ToolCall;
  rewritten: ToolCall;
  /** The canonical tool and the variant tool it became. */
  canonicalTool: ToolDefinition;
  variantTool: ToolDefinition;
  /** The recorded arguments, parsed. */
  originalArguments: Record<string, unknown>;
  /** The variant's arguments (what `rewritten.function.arguments` serializes). */
  variantArguments: Record<string, unknown>;
  /** The recorded result, and what it reads under the variant. */
  originalResult?: string;
  rewrittenResult?: string;
}

export type RewriteFailure = {
  ok: false;
  /** `unparseable`: the trajectory was not recorded under this harness and room; `unmappable_call`: a call cannot be carried over. */
  reason: 'unparseable' | 'unmappable_call';
  detail: string;
};

export type RewriteResult =
  | { ok: true; trajectory: Trajectory; calls: RewrittenCall[]; timeline: Timeline; context: RenderContext }
  | RewriteFailure;

/** What rewriting needs besides the trajectory; build once per (canonical harness, variant) with `prepareRewrite`. */
export interface PreparedRewrite {
  canonical: Harness;
  variant: Variant;
  variantHarnessHash: string;
  entityRenamer: TextRenamer;
  /** By canonical tool name. */
  tools: Map<
    string,
    { canonical: ToolDefinition; variant: ToolDefinition; forward: ArgumentMap; labels: Map<string, string> }
  >;
  /** The variant's tools list as the model sees it (the same in every room; shared by its trajectories, never mutated). */
  toolSpecs: ToolSpec[];
}

export function prepareRewrite(canonical: Harness, variant: Variant): PreparedRewrite {
  const variantTools = new Map(variant.harness.tools.map((tool) => [tool.name, tool]));
  const tools: PreparedRewrite['tools'] = new Map();
  for (const tool of canonical.tools) {
    const entry = variant.mapping.tools[tool.name];
    const target = entry ? variantTools.get(entry.name) : undefined;
    if (!entry || !target) continue;
    // Tool errors name arguments the way the tool spells them: "item_id" under one harness, "productId" under another.
    const labels = new Map<string, string>();
    for (const argument of capabilityArguments[tool.binding.capability]) {
      const before = toolArgumentLabel(tool.binding, argument);
      const after = toolArgumentLabel(target.binding, argument);
      if (before !== after) labels.set(before, after);
    }
    tools.set(tool.name, {
      canonical: tool,
      variant: target,
      forward: { paths: entry.parameters, enumValues: entry.enumValues },
      labels,
    });
  }
  return {
    canonical,
    variant,
    variantHarnessHash: harnessHash(variant.harness),
    entityRenamer: new TextRenamer(variant.mapping.renames.filter((rename) => rename.scope === 'entity')),
    tools,
    toolSpecs: renderHarness(variant.harness, { campaignActive: false }).tools,
  };
}

function parseArguments(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = text.trim() === '' ? {} : JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function relabel(message: string, labels: Map<string, string>): string {
  if (labels.size === 0) return message;
  const pattern = new RegExp(
    [...labels.keys()].map((label) => `"${label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`).join('|'),
    'g',
  );
  return message.replace(pattern, (match) => `"${labels.get(match.slice(1, -1)) ?? match.slice(1, -1)}"`);
}

/** A tool result as the variant's tools would word it: error messages relabelled, renamed tool and skill ids respelled. */
function rewriteToolResult(content: string, labels: Map<string, string>, renamer: TextRenamer): string {
  let text = content;
  if (labels.size > 0 && content.startsWith('{"error"')) {
    try {
      const parsed = JSON.parse(content) as { error?: { code?: unknown; message?: unknown } };
      if (parsed.error && typeof parsed.error.message === 'string')
        text = JSON.stringify({ error: { ...parsed.error, message: relabel(parsed.error.message, labels) } });
    } catch {
      // Not JSON after all: respell names only.
    }
  }
  return renamer.apply(text);
}

/** The render context under the variant: the room's own text with renamed tool and skill ids respelled. */
export function variantContext(context: RenderContext, prepared: PreparedRewrite): RenderContext {
  return context.roomContext === undefined
    ? context
    : { ...context, roomContext: prepared.entityRenamer.apply(context.roomContext) };
}

/** Id of a rewritten trajectory: a function of its source and the variant only. */
export function augmentedTrajectoryId(sourceId: string, variantHash: string): string {
  return `traj-${shortHash({ source: sourceId, variant: variantHash }, 16)}`;
}

/**
 * Splits a recorded trajectory into its timeline and proves the split: rebuilding it under the
 * canonical harness must give back the recorded messages exactly. Once per trajectory, shared by
 * all its variants.
 */
export function parseRecordedTrajectory(
  trajectory: Trajectory,
  canonical: Harness,
  context: RenderContext,
): { ok: true; timeline: Timeline } | RewriteFailure {
  const parsed = parseTimeline(trajectory.messages, canonical, context);
  if (!parsed.ok) return { ok: false, reason: 'unparseable', detail: parsed.reason };
  // The system prompt was just compared with the harness's rendering: reuse it.
  const systemPrompt = trajectory.messages[0].content as string;
  if (
    !sameMessages(
      rebuildTimeline(parsed.timeline, canonical, context, identityRewrite, systemPrompt).messages,
      trajectory.messages,
    )
  ) {
    return {
      ok: false,
      reason: 'unparseable',
      detail: 'rebuilding the trajectory under its own harness does not give back the recorded messages',
    };
  }
  return parsed;
}

/** Rewrites one trajectory recorded under `prepared.canonical` in `context` into the variant (`timeline` from parseRecordedTrajectory, parsed here when absent). */
export function rewriteTrajectory(
  trajectory: Trajectory,
  context: RenderContext,
  prepared: PreparedRewrite,
  parsedTimeline?: Timeline,
): RewriteResult {
  let timeline = parsedTimeline;
  if (timeline === undefined) {
    const parsed = parseRecordedTrajectory(trajectory, prepared.canonical, context);
    if (!parsed.ok) return parsed;
    timeline = parsed.timeline;
  }
  const renamer = prepared.entityRenamer;
  const calls: RewrittenCall[] = [];
  const callsById = new Map<string, RewrittenCall>();
  const labelsById = new Map<string, Map<string, string>>();

  for (const entry of timeline.entries) {
    if (entry.kind !== 'assistant') continue;
    for (const call of entry.message.tool_calls ?? []) {
      const tool = prepared.tools.get(call.function.name);
      if (tool === undefined)
        return {
          ok: false,
          reason: 'unmappable_call',
          detail: `tool call ${call.id} names ${JSON.stringify(call.function.name)}, which the canonical harness does not have`,
        };
      const args = parseArguments(call.function.arguments);
      if (args === undefined)
        return {
          ok: false,
          reason: 'unmappable_call',
          detail: `tool call ${call.id} has arguments that are not a JSON object`,
        };
      const mapped = mapArguments(args, tool.forward);
      if (!mapped.ok)
        return {
          ok: false,
          reason: 'unmappable_call',
          detail: `tool call ${call.id} (${call.function.name}): ${mapped.reason}`,
        };
      const rewritten: ToolCall = {
        id: call.id,
        type: 'function',
        function: { name: tool.variant.name, arguments: JSON.stringify(mapped.value) },
      };
      const record: RewrittenCall = {
        original: call,
        rewritten,
        canonicalTool: tool.canonical,
        variantTool: tool.variant,
        originalArguments: args,
        variantArguments: mapped.value,
      };
      calls.push(record);
      callsById.set(call.id, record);
      labelsById.set(call.id, tool.labels);
    }
  }

  const variantRenderContext = variantContext(context, prepared);
  const rebuilt = rebuildTimeline(timeline, prepared.variant.harness, variantRenderContext, {
    userText: (text) => renamer.apply(text),
    assistant: (message) => rewriteAssistant(message, callsById, renamer),
    toolContent: (toolCallId, content) => {
      const rewritten = rewriteToolResult(content, labelsById.get(toolCallId) ?? new Map(), renamer);
      const record = callsById.get(toolCallId);
      if (record) {
        record.originalResult = content;
        record.rewrittenResult = rewritten;
      }
      return rewritten;
    },
  });

  const remap = (index: number) => rebuilt.indexMap.get(index) ?? index;
  const variant = prepared.variant;
  const result: Trajectory = {
    ...trajectory,
    id: augmentedTrajectoryId(trajectory.id, variant.hash),
    messages: rebuilt.messages,
    tools: prepared.toolSpecs,
    harness: {
      id: variant.harness.id,
      version: variant.harness.version,
      hash: prepared.variantHarnessHash,
      variantHash: variant.hash,
      families: [...variant.mapping.families],
    },
    calls: trajectory.calls.map((call) => ({ ...call, messageIndex: remap(call.messageIndex) })),
    issues: trajectory.issues.map((issue) => ({
      ...issue,
      messageIndex: remap(issue.messageIndex),
      detail: renamer.apply(issue.detail),
    })),
    meta: { ...trajectory.meta, sourceTrajectoryId: trajectory.id, sourceHarnessHash: variant.mapping.sourceHash },
  };
  return { ok: true, trajectory: result, calls, timeline, context: variantRenderContext };
}

function rewriteAssistant(
  message: AssistantMessage,
  calls: Map<string, RewrittenCall>,
  renamer: TextRenamer,
): AssistantMessage {
  const result: AssistantMessage = {
    ...message,
    content: message.content === null ? null : renamer.apply(message.content),
  };
  if (message.tool_calls !== undefined)
    result.tool_calls = message.tool_calls.map((call) => calls.get(call.id)?.rewritten ?? call);
  if (message.reasoning_content !== undefined) result.reasoning_content = renamer.apply(message.reasoning_content);
  return result;
}

/** Messages equal field by field (the identity self-check; cheaper than comparing canonical JSON of whole trajectories). */
export function sameMessages(left: readonly ChatMessage[], right: readonly ChatMessage[]): boolean {
  if (left.length !== right.length) return false;
  return left.every((message, index) => {
    const other = right[index];
    if (message.role !== other.role || message.content !== other.content) return false;
    if (message.role === 'tool') return message.tool_call_id === (other as typeof message).tool_call_id;
    if (message.role !== 'assistant') return true;
    const otherAssistant = other as typeof message;
    if (message.reasoning_content !== otherAssistant.reasoning_content) return false;
    const calls = message.tool_calls ?? [];
    const otherCalls = otherAssistant.tool_calls ?? [];
    return (
      calls.length === otherCalls.length &&
      calls.every((call, position) => canonicalJson(call) === canonicalJson(otherCalls[position]))
    );
  });
}
