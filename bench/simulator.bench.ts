/**
 * Live-room simulator speed:
 * 1. catalog generation (10k and 100k items);
 * 2. simulator steps per second with the scripted expert (model calls + tool execution + hooks +
 *    verifier, everything an episode does);
 * 3. the agent loop's own overhead per step: the same episodes replayed by a zero-cost policy
 *    (it hands back the expert's recorded responses), minus the bare cost of executing the same
 *    tool calls and of the verifier, both measured separately in the same run. The loop caches
 *    rendered prompts per (harness, room), as RL replays a task G times; the cold figure renders
 *    every episode (a fresh harness object per round).
 * Prints figures, never asserts on time (goal: loop overhead < 50 µs per step).
 *
 *   make build-dev && node dist/bench/simulator.bench.js [--tasks 1000] [--rounds 5]
 */
import { loadHarness } from '../shared/harness/load-harness';
import { renderHarness } from '../shared/harness/render';
import { harnessHash } from '../shared/harness/harness-hash';
import type { ChatRequest, ChatResponse, ModelClient } from '../shared/models/model-client';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { runEpisode } from '../shared/simulator/agent-loop';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { renderContextOf } from '../shared/simulator/room-context';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import type { Task } from '../shared/simulator/tasks/task-schema';
import { executeToolCall } from '../shared/simulator/tools/execute-tool-call';
import { verifyEpisode } from '../shared/simulator/verifier/verify-episode';
import { generateWorld } from '../shared/simulator/world/generate-world';
import { createWorld, type World } from '../shared/simulator/world/world';
import type { ChatMessage, ToolCall } from '../shared/trajectory/messages';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index === -1 ? undefined : Number(process.argv[index + 1]);
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

const taskCount = argument('tasks', 1000);
const rounds = argument('rounds', 5);

/** Hands back recorded responses in order: the cheapest policy a loop can have. */
class ReplayPolicy implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider = 'bench';
  readonly modelId = 'replay';
  private responses: ChatResponse[] = [];
  private next = 0;
  load(responses: ChatResponse[]): void {
    this.responses = responses;
    this.next = 0;
  }
  chat(_request: ChatRequest): Promise<ChatResponse> {
    return Promise.resolve(this.responses[this.next++]);
  }
}

interface Recorded {
  task: Task;
  world: World;
  responses: ChatResponse[];
  messages: ChatMessage[];
  calls: ToolCall[];
  steps: number;
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/simulator.bench.js [--tasks 1000] [--rounds 5]');
  for (const itemCount of [10_000, 100_000]) {
    const started = performance.now();
    generateWorld({ seed: 'bench', itemCount });
    console.log(`catalog of ${itemCount.toLocaleString('en')} items: ${(performance.now() - started).toFixed(0)} ms`);
  }

  const harness = await loadHarness(sampleHarnessDirectory());
  const hash = harnessHash(harness);
  const tasks = generateTasks({ count: taskCount, seed: 'bench' });
  const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
  const worlds = tasks.map((task) => createWorld(task.room));

  // Record the expert's episodes (responses, messages, tool calls) for the replay.
  const recorded: Recorded[] = [];
  for (const [index, task] of tasks.entries()) {
    const trajectory = await runEpisode({ policy: expert, harness, task, world: worlds[index], harnessHash: hash });
    const responses: ChatResponse[] = trajectory.calls.map((call) => ({
      message: trajectory.messages[call.messageIndex] as ChatResponse['message'],
      finishReason: call.finishReason as ChatResponse['finishReason'],
      usage: { promptTokens: call.promptTokens, completionTokens: call.completionTokens },
      timings: { startedAt: call.startedAt, queueMs: call.queueMs, ttftMs: call.ttftMs, e2eMs: call.e2eMs },
      model: 'replay',
      attempts: 1,
    }));
    const calls = trajectory.messages.flatMap((message) =>
      message.role === 'assistant' ? (message.tool_calls ?? []) : [],
    );
    recorded.push({
      task,
      world: worlds[index],
      responses,
      messages: trajectory.messages,
      calls,
      steps: trajectory.calls.length,
    });
  }
  const steps = recorded.reduce((sum, entry) => sum + entry.steps, 0);
  const toolCalls = recorded.reduce((sum, entry) => sum + entry.calls.length, 0);
  console.log(
    `\n${tasks.length} tasks, ${steps} model steps, ${toolCalls} tool calls (${(steps / tasks.length).toFixed(2)} steps per episode)`,
  );

  const expertTimes: number[] = [];
  const replayTimes: number[] = [];
  const coldReplayTimes: number[] = [];
  const toolTimes: number[] = [];
  const verifyTimes: number[] = [];
  const renderTimes: number[] = [];
  const replay = new ReplayPolicy();
  for (let round = 0; round < rounds; round++) {
    let started = performance.now();
    for (const entry of recorded)
      await runEpisode({ policy: expert, harness, task: entry.task, world: entry.world, harnessHash: hash });
    expertTimes.push(performance.now() - started);

    started = performance.now();
    for (const entry of recorded) {
      replay.load(entry.responses);
      await runEpisode({ policy: replay, harness, task: entry.task, world: entry.world, harnessHash: hash });
    }
    replayTimes.push(performance.now() - started);

    // A copy of the harness misses the loop's render cache: every episode renders again.
    const fresh = { ...harness };
    started = performance.now();
    for (const entry of recorded) {
      replay.load(entry.responses);
      await runEpisode({ policy: replay, harness: fresh, task: entry.task, world: entry.world, harnessHash: hash });
    }
    coldReplayTimes.push(performance.now() - started);

    started = performance.now();
    for (const entry of recorded) for (const call of entry.calls) executeToolCall(entry.world, harness, call);
    toolTimes.push(performance.now() - started);

    started = performance.now();
    for (const entry of recorded)
      verifyEpisode({ task: entry.task, harness, messages: entry.messages, world: entry.world });
    verifyTimes.push(performance.now() - started);

    started = performance.now();
    for (const entry of recorded) renderHarness(harness, renderContextOf(entry.world));
    renderTimes.push(performance.now() - started);
  }

  const expertMs = median(expertTimes);
  const replayMs = median(replayTimes);
  const coldReplayMs = median(coldReplayTimes);
  const toolMs = median(toolTimes);
  const verifyMs = median(verifyTimes);
  const renderMs = median(renderTimes);
  const micros = (ms: number, per: number) => ((ms * 1000) / per).toFixed(1);
  const loopMs = replayMs - toolMs - verifyMs;
  console.log(
    `\nscripted expert (median of ${rounds} rounds): ${((steps / expertMs) * 1000).toFixed(0)} steps/s, ${((tasks.length / expertMs) * 1000).toFixed(0)} episodes/s (${micros(expertMs, steps)} µs per step, all included)`,
  );
  console.log(
    `zero-cost replay policy:  ${micros(replayMs, steps)} µs per step, all included (render cache warm); ${micros(coldReplayMs, steps)} µs cold`,
  );
  console.log(
    `  bare tool execution:    ${micros(toolMs, toolCalls)} µs per call, ${micros(toolMs, steps)} µs per step`,
  );
  console.log(
    `  verifier:               ${micros(verifyMs, tasks.length)} µs per episode, ${micros(verifyMs, steps)} µs per step`,
  );
  console.log(
    `  harness rendering:      ${micros(renderMs, tasks.length)} µs per episode, ${micros(renderMs, steps)} µs per step`,
  );
  console.log(
    `agent loop overhead (replay - tools - verifier): ${micros(loopMs, steps)} µs per step with the render cache warm [goal < 50]; ${micros(coldReplayMs - toolMs - verifyMs, steps)} µs per step when every episode renders its harness`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
