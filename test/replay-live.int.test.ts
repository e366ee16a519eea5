import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import {
  OpenAiTestServer,
  type RecordedRequest,
  type ScriptedChatResponse,
} from '../shared/models/testing/openai-test-server';
import { runEpisode } from '../shared/simulator/agent-loop';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import type { AssistantMessage, ChatMessage } from '../shared/trajectory/messages';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { replayStage } from '../workers/replay/processor';
import { readReplayPartFile } from '../workers/replay/replay-part-file';
import type { ReplayReport } from '../workers/replay/replay-report';

/**
 * Live replay: collect-stage trajectories from the simulator's scripted expert, replayed against
 * a test server that plays the "live model" (it answers with the recorded steps, and for some
 * sessions with altered tool arguments); tool calls run in the simulator through the harness.
 */

let directory: string;
let store: FileArtifactStore;
let server: OpenAiTestServer | undefined;

beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'hat-replay-live-'));
  store = new FileArtifactStore(directory);
});

afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(directory, { recursive: true, force: true });
});

const assistants = (trajectory: Trajectory) =>
  trajectory.messages.filter((message): message is AssistantMessage => message.role === 'assistant');
const conversationKey = (messages: ChatMessage[]) =>
  `${messages[0]?.content}\u0000${messages.find((message) => message.role === 'user')?.content}`;

it('feeds the live model its own outputs, runs its tool calls in the simulator under its own tool_call_ids, and counts divergences from the recording', async () => {
  const harness = await loadHarness(sampleHarnessDirectory());
  const tasks = generateTasks({
    count: 10,
    seed: 'replay-live',
    categoryWeights: { chit_chat: 0, out_of_catalog: 0, compliance_trap: 0 },
  });
  const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
  const trajectories: Trajectory[] = [];
  for (const task of tasks) trajectories.push(await runEpisode({ policy: expert, harness, task }));
  const withTools = trajectories.filter((trajectory) =>
    assistants(trajectory).some((message) => (message.tool_calls?.length ?? 0) > 0),
  );
  expect(withTools.length).toBeGreaterThanOrEqual(6);

  // Sessions whose live model alters the arguments of every tool call it repeats.
  const altered = new Set(withTools.slice(0, 2).map((trajectory) => trajectory.id));
  const recordedByConversation = new Map(
    trajectories.map((trajectory) => [conversationKey(trajectory.messages), trajectory]),
  );
  const answered = new Map<string, number>();
  const serverIds = new Set<string>();
  server = await OpenAiTestServer.start({
    responder: (request: RecordedRequest): ScriptedChatResponse => {
      const messages = request.body.messages as ChatMessage[];
      const recorded = recordedByConversation.get(conversationKey(messages)) as Trajectory;
      const step = answered.get(recorded.id) ?? 0;
      answered.set(recorded.id, step + 1);
      const message = assistants(recorded)[step];
      if (!message.tool_calls?.length) return { content: message.content ?? '' };
      return {
        toolCalls: message.tool_calls.map((call) => {
          const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
          return {
            name: call.function.name,
            arguments: altered.has(recorded.id) ? { ...args, item_id: 'item-that-does-not-exist' } : args,
          };
        }),
      };
    },
  });

  // Two sessions the live mode cannot replay: a tool the harness lacks, and a task it was not given.
  const unknownTool = structuredClone(withTools[withTools.length - 1]);
  unknownTool.id = 'unknown-tool-session';
  unknownTool.tools[0].function.name = 'teleport_item';
  const unknownTask = structuredClone(withTools[withTools.length - 1]);
  unknownTask.id = 'unknown-task-session';
  unknownTask.taskId = 'task-nobody-generated';
  const sessions = await writeJsonl(store, 'trajectories.jsonl.gz', [...trajectories, unknownTool, unknownTask]);
  const taskFile = await writeJsonl(store, 'tasks.jsonl.gz', tasks);

  await runStageLocally(
    replayStage,
    {
      inputs: [sessions.uri],
      target: { adapter: 'openai', baseUrl: server.baseUrl, model: 'live-model', concurrency: 8, maxRetries: 0 },
      mode: 'live',
      live: { harness: sampleHarnessDirectory(), tasks: [taskFile.uri] },
      load: { kind: 'closed', concurrency: 4 },
      // The recorded tool times stand here (the tool latency model would replace those of simulator sessions).
      toolLatency: { apply: 'none' },
    },
    { store, openObject: (uri) => openArtifactObject(uri), logger: silentLogger(), seed: 'live' },
  );
  const report = JSON.parse((await store.getBuffer('report.json')).toString('utf8')) as ReplayReport;
  const part = await readReplayPartFile(store, 'part-00000.json.gz');

  expect(report.unreplayable.map((item) => [item.sessionId, item.reason])).toEqual([
    ['unknown-tool-session', 'unknown_tools'],
    ['unknown-task-session', 'missing_task'],
  ]);
  expect(report.counts).toMatchObject({ sessions: trajectories.length, sessionsFailed: 0, callsFailed: 0 });
  const recordedSteps = trajectories.reduce((sum, trajectory) => sum + assistants(trajectory).length, 0);
  const alteredToolSteps = trajectories
    .filter((trajectory) => altered.has(trajectory.id))
    .reduce(
      (sum, trajectory) =>
        sum + assistants(trajectory).filter((message) => (message.tool_calls?.length ?? 0) > 0).length,
      0,
    );
  expect(report.live).toEqual({
    steps: recordedSteps,
    divergedSteps: alteredToolSteps,
    divergenceRate: alteredToolSteps / recordedSteps,
    toolNameDivergences: 0,
    argumentDivergences: alteredToolSteps,
    sessionsDiverged: 2,
  });

  // Every tool result the live model read answers a tool_call_id the server itself issued.
  for (const request of server.chatRequests) {
    const messages = request.body.messages as ChatMessage[];
    const issued = new Set(
      messages.flatMap((message) =>
        message.role === 'assistant' ? (message.tool_calls ?? []).map((call) => call.id) : [],
      ),
    );
    for (const message of messages) {
      if (message.role !== 'tool') continue;
      expect(issued.has(message.tool_call_id)).toBe(true);
      expect(message.tool_call_id).toMatch(/^call_chatcmpl-req-\d+_\d+$/);
      serverIds.add(message.tool_call_id);
    }
  }
  for (const session of part.sessions) {
    const recorded = trajectories.find((trajectory) => trajectory.id === session.sessionId) as Trajectory;
    const recordedIds = assistants(recorded).flatMap((message) => (message.tool_calls ?? []).map((call) => call.id));
    expect(Object.keys(session.live!.toolCallIdMap).sort()).toEqual([...recordedIds].sort());
    for (const liveId of Object.values(session.live!.toolCallIdMap)) expect(serverIds.has(liveId)).toBe(true);
  }
  // A step that matches the recording waits the recorded tool time; an altered one the simulator's.
  for (const call of part.calls) {
    const recorded = trajectories.find((trajectory) => trajectory.id === call.sessionId) as Trajectory;
    const recordedCall = recorded.calls[call.callIndex];
    if (call.divergence?.kind === 'none') expect(call.thinkMs).toBe(recordedCall?.toolMs ?? 0);
    else expect(call.divergence?.kind).toBe('arguments');
  }
});
