import type { Harness } from '../../shared/harness/harness-types';
import type { RewrittenCall } from '../../shared/harness/hsa/rewrite-trajectory';
import { executeToolCall } from '../../shared/simulator/tools/execute-tool-call';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { verifyEpisode } from '../../shared/simulator/verifier/verify-episode';
import type { World } from '../../shared/simulator/world/world';
import type { ChatMessage } from '../../shared/trajectory/messages';
import type { Reward, Trajectory } from '../../shared/trajectory/trajectory';

/**
 * The replay check: the rewritten tool calls, executed through the variant harness's bindings
 * in the task's world, must return exactly the recorded results (as rewritten), and the
 * verifier must score the rewritten trajectory under the variant at least as high as the
 * recorded one under the canonical harness. It catches what the other checks cannot see: a
 * binding that sends a renamed parameter to the wrong canonical argument still round-trips and
 * validates, but executes differently.
 */

export type ReplayOutcome =
  { ok: true; reward: Reward } | { ok: false; reason: 'replay_result' | 'replay_reward'; detail: string };

/** Viewer turns the episode was scored on: the agent loop's record, else the user messages. */
export function scoredTurns(trajectory: Trajectory, task: Task): number {
  const turns = trajectory.meta.session?.turns;
  const recorded =
    typeof turns === 'number' ? turns : trajectory.messages.filter((message) => message.role === 'user').length;
  return Math.max(1, Math.min(recorded, task.turns.length));
}

/** The reward of a trajectory under the harness it was recorded with (computed once per trajectory). */
export function scoreRecorded(task: Task, world: World, harness: Harness, trajectory: Trajectory): Reward {
  return verifyEpisode({
    task,
    world,
    harness,
    messages: trajectory.messages,
    turnCount: scoredTurns(trajectory, task),
  });
}

export function replayCheck(input: {
  task: Task;
  world: World;
  variant: Harness;
  messages: ChatMessage[];
  calls: readonly RewrittenCall[];
  recordedReward: Reward;
  turnCount: number;
}): ReplayOutcome {
  for (const call of input.calls) {
    const execution = executeToolCall(input.world, input.variant, call.rewritten);
    if (execution.content !== call.rewrittenResult) {
      return {
        ok: false,
        reason: 'replay_result',
        detail: `call ${call.rewritten.id} (${call.rewritten.function.name} ${call.rewritten.function.arguments}) returned ${execution.content.slice(0, 160)}; recorded ${String(call.rewrittenResult).slice(0, 160)}`,
      };
    }
  }
  const reward = verifyEpisode({
    task: input.task,
    world: input.world,
    harness: input.variant,
    messages: input.messages,
    turnCount: input.turnCount,
  });
  // Rewards are rounded to 4 places by the verifier: equal means equal.
  if (reward.total < input.recordedReward.total) {
    return {
      ok: false,
      reason: 'replay_reward',
      detail: `reward ${reward.total} under the variant < ${input.recordedReward.total} recorded (${reward.notes.slice(0, 3).join('; ')})`,
    };
  }
  return { ok: true, reward };
}
