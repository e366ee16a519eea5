import type { ChatRequest, ChatResponse } from '../../shared/models/model-client';
import type { ReplayCallPlan, ReplaySession } from './recorded-session';
import type { LiveDivergence, LiveSessionSummary } from './replay-records';
import type { ToolThinkTime } from './tool-latency-model';

/** The next model call of a session. */
export interface SessionStep {
  request: Pick<ChatRequest, 'messages' | 'tools' | 'maxTokens'>;
  messageIndex: number;
  /** Viewer turn the step answers (0-based). */
  turnIndex: number;
  /** The recorded call this step replays or is compared with. */
  recorded?: ReplayCallPlan;
}

/** What follows a call: the think time before the next one and, live, how it compares. */
export interface StepOutcome {
  thinkMs: number;
  /** This call was the turn's final answer (what the viewer hears); the next call opens a new turn. */
  endsTurn: boolean;
  divergence?: LiveDivergence;
}

/**
 * Decides what a session sends: forced history sends the recorded contexts, live mode feeds the
 * model's own outputs back. The runner (replay-engine) owns the clock, the measuring and the
 * load; a driver only says what the next request is and how long to think after a response.
 */
export interface SessionDriver {
  /** The next call, or undefined when the session is complete. */
  next(): SessionStep | undefined;
  /** Takes the response of the step `next` returned. */
  accept(step: SessionStep, response: ChatResponse): Promise<StepOutcome> | StepOutcome;
  /** Live mode: divergence totals and the tool_call_id map. */
  liveSummary?(): LiveSessionSummary;
  /** Every request the session will send, when they are known up front (forced history): built before the measured window. */
  plannedRequests?(): Array<SessionStep['request'] & { messageIndex: number }>;
}

/**
 * Forced history: call k sends the recorded messages before the k-th recorded assistant message
 * (the exact recorded workload, whatever the model answers), and waits the recorded tool time
 * after it. `maxTokensFromRecording` caps the output at the recorded length, as
 * `vllm bench serve` fixes output lengths.
 */
export function forcedHistoryDriver(
  session: ReplaySession,
  options: { maxTokensFromRecording: boolean; toolThinkTime?: ToolThinkTime },
): SessionDriver {
  let position = 0;
  return {
    next() {
      const recorded = session.calls[position];
      if (!recorded) return undefined;
      const maxTokens =
        options.maxTokensFromRecording &&
        recorded.recordedOutputTokens !== undefined &&
        recorded.recordedOutputTokens > 0
          ? recorded.recordedOutputTokens
          : undefined;
      return {
        request: {
          messages: session.messages.slice(0, recorded.messageIndex),
          ...(session.tools.length > 0 ? { tools: session.tools } : {}),
          ...(maxTokens !== undefined ? { maxTokens } : {}),
        },
        messageIndex: recorded.messageIndex,
        turnIndex: recorded.turnIndex,
        recorded,
      };
    },
    plannedRequests() {
      return session.calls.map((recorded) => {
        const maxTokens =
          options.maxTokensFromRecording &&
          recorded.recordedOutputTokens !== undefined &&
          recorded.recordedOutputTokens > 0
            ? recorded.recordedOutputTokens
            : undefined;
        return {
          messageIndex: recorded.messageIndex,
          messages: session.messages.slice(0, recorded.messageIndex),
          ...(session.tools.length > 0 ? { tools: session.tools } : {}),
          ...(maxTokens !== undefined ? { maxTokens } : {}),
        };
      });
    },
    accept(step) {
      const callIndex = position++;
      const recorded = step.recorded as ReplayCallPlan;
      // The tool model supplies the think time of simulator sessions (their tools took microseconds).
      const modelled =
        options.toolThinkTime && recorded.toolNames.length > 0
          ? options.toolThinkTime(recorded.toolNames, callIndex)
          : undefined;
      return { thinkMs: modelled ?? recorded.thinkMsAfter, endsTurn: recorded.endsTurn };
    },
  };
}
