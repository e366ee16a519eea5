import type { Harness } from '../../shared/harness/harness-types';
import { canonicalJson } from '../../shared/hash/hash';
import { executeToolCall } from '../../shared/simulator/tools/execute-tool-call';
import { findTool } from '../../shared/harness/tool-binding';
import type { World } from '../../shared/simulator/world/world';
import type { AssistantMessage, ChatMessage, ToolCall } from '../../shared/trajectory/messages';
import type { ReplayCallPlan, ReplaySession, UnreplayableSession } from './recorded-session';
import type { LiveDivergence, LiveSessionSummary } from './replay-records';
import type { SessionDriver, SessionStep } from './session-driver';
import type { ToolThinkTime } from './tool-latency-model';

/** One recorded assistant step and what followed it before the next step. */
interface RecordedStep {
  message: AssistantMessage;
  plan: ReplayCallPlan;
  /** System messages between this step's tool results and the next step (hook injections). */
  injections: ChatMessage[];
}

/** A viewer turn: the inputs that open it and the recorded steps that answered it. */
interface RecordedTurn {
  opening: ChatMessage[];
  steps: RecordedStep[];
}

/** Splits a recorded session into turns (a user message opens one) of assistant steps. */
function recordedTurns(session: ReplaySession): RecordedTurn[] {
  const plans = new Map(session.calls.map((plan) => [plan.messageIndex, plan]));
  const turns: RecordedTurn[] = [];
  let opening: ChatMessage[] = [];
  let current: RecordedTurn | undefined;
  for (const [index, message] of session.messages.entries()) {
    if (message.role === 'assistant') {
      if (!current || opening.some((input) => input.role === 'user')) {
        current = { opening, steps: [] };
        turns.push(current);
      } else if (opening.length > 0) {
        current.steps.at(-1)?.injections.push(...opening);
      }
      opening = [];
      current.steps.push({ message, plan: plans.get(index) as ReplayCallPlan, injections: [] });
    } else if (message.role !== 'tool') {
      opening.push(message);
    }
  }
  return turns;
}

/**
 * Checks that a session can be replayed live under this harness and world: every tool the
 * recording offered or called must be one the harness can execute, and the session's task must
 * be known (its room is the world the tools read).
 */
export function liveProblem(
  session: ReplaySession,
  harness: Harness,
  hasTask: boolean,
): UnreplayableSession | undefined {
  const offered = session.tools.map((tool) => tool.function.name);
  const called = session.messages.flatMap((message) =>
    message.role === 'assistant' ? (message.tool_calls ?? []).map((call) => call.function.name) : [],
  );
  const unknown = [...new Set([...offered, ...called])].filter((name) => !findTool(harness, name));
  if (unknown.length > 0) {
    return {
      sessionId: session.id,
      source: session.source,
      reason: 'unknown_tools',
      detail: `the harness has no tool named ${unknown.map((name) => JSON.stringify(name)).join(', ')}; live replay runs tools in the simulator through the harness`,
    };
  }
  if (!hasTask) {
    const task =
      session.taskId === undefined
        ? 'the record names no taskId'
        : `task ${JSON.stringify(session.taskId)} is not in live.tasks`;
    return {
      sessionId: session.id,
      source: session.source,
      reason: 'missing_task',
      detail: `${task}; live replay needs the task's room for the simulator`,
    };
  }
  return undefined;
}

export interface LiveDriverOptions {
  harness: Harness;
  world: World;
  /** Model calls allowed per viewer turn before the session stops. Default 6. */
  maxStepsPerTurn?: number;
  /** Tool latency model of simulator sessions: think time of every live tool step. */
  toolThinkTime?: ToolThinkTime;
}

/**
 * Live mode: the model's own outputs are fed back. Each viewer turn opens with the recorded
 * inputs (user message, hook injections); every tool call the model makes runs in the simulator
 * through the harness and its result goes back under the model's own tool_call_id (recorded ids
 * are remapped to the live ones step by step). Each live step is compared with the recorded step
 * at the same position of the turn: tool names, their count, and arguments (as canonical JSON).
 * The think time after a step comes from the tool latency model when one applies, else it is the
 * recorded one when the step matches the recording, else the simulator's duration of the live calls.
 */
export function liveDriver(session: ReplaySession, options: LiveDriverOptions): SessionDriver {
  const turns = recordedTurns(session);
  const maxSteps = options.maxStepsPerTurn ?? 6;
  const transcript: ChatMessage[] = [];
  const summary: LiveSessionSummary = {
    steps: 0,
    divergedSteps: 0,
    toolNameDivergences: 0,
    argumentDivergences: 0,
    toolCallIdMap: {},
  };
  const usedIds = new Set<string>();
  let turnIndex = 0;
  let stepInTurn = 0;
  let finished = turns.length === 0;
  if (!finished) transcript.push(...turns[0].opening);

  return {
    next(): SessionStep | undefined {
      if (finished) return undefined;
      const recorded = turns[turnIndex]?.steps[stepInTurn];
      return {
        request: { messages: [...transcript], ...(session.tools.length > 0 ? { tools: session.tools } : {}) },
        messageIndex: transcript.length,
        turnIndex,
        ...(recorded ? { recorded: recorded.plan } : {}),
      };
    },
    accept(_step, response) {
      const turn = turns[turnIndex];
      const recorded = turn.steps[stepInTurn];
      const toolCalls = uniqueIds(response.message.tool_calls ?? [], usedIds, transcript.length);
      const divergence = compareStep(recorded?.message, toolCalls);
      summary.steps++;
      if (divergence.kind !== 'none') summary.divergedSteps++;
      if (divergence.kind === 'arguments') summary.argumentDivergences++;
      else if (divergence.kind !== 'none') summary.toolNameDivergences++;
      const assistant: AssistantMessage = {
        role: 'assistant',
        content: response.message.content ?? null,
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      };
      transcript.push(assistant);
      if (toolCalls.length > 0) {
        let slowestMs = 0;
        for (const [position, call] of toolCalls.entries()) {
          const execution = executeToolCall(options.world, options.harness, call);
          transcript.push({ role: 'tool', tool_call_id: call.id, content: execution.content });
          slowestMs = Math.max(slowestMs, execution.durationMs);
          const recordedCall = recorded?.message.tool_calls?.[position];
          if (recordedCall) summary.toolCallIdMap[recordedCall.id] = call.id;
        }
        transcript.push(...(recorded?.injections ?? []));
        stepInTurn++;
        if (stepInTurn >= maxSteps) finished = true;
        const names = toolCalls.map((call) => call.function.name);
        const thinkMs = options.toolThinkTime
          ? options.toolThinkTime(names, summary.steps - 1)
          : divergence.kind === 'none' && recorded
            ? recorded.plan.thinkMsAfter
            : slowestMs;
        // A turn cut off at maxStepsPerTurn never got its answer: it ends no turn.
        return { thinkMs, divergence, endsTurn: false };
      }
      // A final answer ends the turn, wherever the recording was: the next turn opens with its recorded inputs.
      turnIndex++;
      stepInTurn = 0;
      const nextTurn = turns[turnIndex];
      if (nextTurn) transcript.push(...nextTurn.opening);
      else finished = true;
      return { thinkMs: 0, divergence, endsTurn: true };
    },
    liveSummary: () => summary,
  };
}

/** Tool-call ids as the server sent them, made present and unique within the session. */
function uniqueIds(calls: ToolCall[], used: Set<string>, messageIndex: number): ToolCall[] {
  return calls.map((call, position) => {
    let id = call.id !== '' ? call.id : `call-${messageIndex}-${position}`;
    if (used.has(id)) id = `${id}-${messageIndex}-${position}`;
    used.add(id);
    return { ...call, id };
  });
}

function compareStep(recorded: AssistantMessage | undefined, live: ToolCall[]): LiveDivergence {
  if (!recorded)
    return { kind: 'extra_step', detail: 'the recording has no step here: the live model took more steps' };
  const recordedCalls = recorded.tool_calls ?? [];
  if (recordedCalls.length > 0 !== live.length > 0) {
    return {
      kind: 'tools_vs_answer',
      detail: recordedCalls.length > 0 ? 'recorded tool calls, live answered' : 'recorded an answer, live called tools',
    };
  }
  if (recordedCalls.length !== live.length)
    return { kind: 'tool_count', detail: `recorded ${recordedCalls.length} tool call(s), live ${live.length}` };
  for (const [position, call] of live.entries()) {
    const expected = recordedCalls[position];
    if (expected.function.name !== call.function.name)
      return {
        kind: 'tool_name',
        detail: `call ${position}: recorded ${expected.function.name}, live ${call.function.name}`,
      };
  }
  for (const [position, call] of live.entries()) {
    const expected = recordedCalls[position];
    if (argumentKey(expected.function.arguments) !== argumentKey(call.function.arguments)) {
      return {
        kind: 'arguments',
        detail: `call ${position} (${call.function.name}): recorded ${expected.function.arguments.slice(0, 200)}, live ${call.function.arguments.slice(0, 200)}`,
      };
    }
  }
  return { kind: 'none' };
}

/** Arguments compared as canonical JSON (key order and spacing do not count); invalid JSON as text. */
function argumentKey(text: string): string {
  try {
    return canonicalJson(JSON.parse(text));
  } catch {
    return text;
  }
}
