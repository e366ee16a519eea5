/**
 * Throughput of the collect stage and the cost of its OpenAI-compatible client. Three figures:
 *   1. trajectories per second of the in-process stage (`hat stage collect`'s path: plan, parts,
 *      finish, gzip JSONL to a file store) with the scripted teacher;
 *   2. the same stage with an `openai` teacher against the local test server (in a child process,
 *      the scripted expert deciding every answer, zero model delay), 64 episodes in flight;
 *   3. the openai client's overhead per call at 64 concurrent requests against that server, as
 *      bench/openai-client.bench.ts measures it (own time = latency minus the send-to-last-chunk
 *      window; event-loop busy time per call against a bare node:http loop).
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/collect.bench.js [--tasks 2000] [--calls 4000]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { loadEnv } from '../shared/config/env';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import { createModelClient } from '../shared/models/model-registry';
import { OpenAiTestServer, type ScriptedChatResponse } from '../shared/models/testing/openai-test-server';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import type { ChatMessage, ToolSpec } from '../shared/trajectory/messages';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import type { CollectOutput } from '../workers/collect/collect-contract';
import { collectStage } from '../workers/collect/processor';
import { taskFirstTurn } from '../workers/distill/task-prompts';
import { bareHttpCall, percentile, runMode, type Call, type ModeResult } from './openai-client.bench';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { checkBenchFlags, endsWithThisProcess } from './bench-flags';

registerModelAdapters();

const taskSeed = 'collect-bench';
const itemCount = 2000;

function flag(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

/** The server process: the scripted expert answers every request it receives, streamed with no delay. */
async function serve(count: number): Promise<void> {
  const tasks = generateTasks({ count, seed: taskSeed, world: { itemCount } });
  const expert = new ScriptedExpert({ tasks, harnesses: [await loadHarness(sampleHarnessDirectory())] });
  const server = await OpenAiTestServer.start({
    models: ['bench-teacher'],
    responder: async (request): Promise<ScriptedChatResponse> => {
      const reply = await expert.chat({
        messages: request.body.messages as ChatMessage[],
        tools: request.body.tools as ToolSpec[],
      });
      return {
        ...(reply.message.content !== null ? { content: reply.message.content } : {}),
        ...(reply.message.tool_calls
          ? {
              toolCalls: reply.message.tool_calls.map((call) => ({
                id: call.id,
                name: call.function.name,
                arguments: call.function.arguments,
              })),
            }
          : {}),
      };
    },
  });
  process.send?.({ url: server.url });
  process.on('message', () => {
    void server.close().then(() => process.exit(0));
  });
}

async function startServerProcess(count: number): Promise<{ child: ChildProcess; url: string }> {
  const child = endsWithThisProcess(fork(__filename, ['--serve', String(count)], { stdio: 'inherit' }));
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`test server exited with ${code}`)));
  });
  return { child, url };
}

interface StageFigures {
  seconds: number;
  trajectoriesPerSecond: number;
  callsPerSecond: number;
  busyMsPerCall: number;
  output: CollectOutput;
}

async function timeStage(name: string, config: Record<string, unknown>): Promise<StageFigures> {
  const directory = await mkdtemp(join(tmpdir(), `hat-collect-bench-${name}-`));
  const stores = createStoreCache(loadEnv({}));
  try {
    const busyBefore = performance.eventLoopUtilization();
    const started = performance.now();
    const result = await runStageLocally(collectStage, config, {
      store: new FileArtifactStore(directory),
      openObject: stores.openObject,
      logger: silentLogger(),
      seed: taskSeed,
      concurrency: 1,
    });
    const seconds = (performance.now() - started) / 1000;
    const busy = performance.eventLoopUtilization(busyBefore);
    const output = result.output as CollectOutput;
    const stats = JSON.parse((await new FileArtifactStore(directory).getBuffer('stats.json')).toString()) as {
      totals: { calls: number };
    };
    return {
      seconds,
      trajectoriesPerSecond: output.accepted / seconds,
      callsPerSecond: stats.totals.calls / seconds,
      busyMsPerCall: busy.active / stats.totals.calls,
      output,
    };
  } finally {
    await stores.close();
    await rm(directory, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/collect.bench.js [--tasks 2000] [--openai-tasks 1000] [--calls 4000]');
  const taskCount = flag('--tasks', 2000);
  const openAiTasks = Math.min(taskCount, flag('--openai-tasks', 1000));
  const calls = flag('--calls', 4000);
  const generate = { count: taskCount, seed: taskSeed, itemCount };

  // Warm-up, so module loading and JIT do not land in the first figure.
  await timeStage('warmup', { generate: { ...generate, count: 100 }, tasksPerPart: 100 });
  const scripted = await timeStage('scripted', { generate, tasksPerPart: 250 });

  const { child, url } = await startServerProcess(taskCount);
  const teacher = { adapter: 'openai', baseUrl: `${url}/v1`, model: 'bench-teacher', concurrency: 64, maxRetries: 0 };
  // One part, 64 episodes in flight: every request of the stage goes through one endpoint gate of 64.
  const viaServer = await timeStage('openai', {
    generate: { ...generate, count: openAiTasks },
    tasksPerPart: openAiTasks,
    concurrency: 64,
    teacher,
  });
  if (viaServer.output.accepted !== openAiTasks)
    throw new Error(
      `the openai teacher run accepted ${viaServer.output.accepted} of ${openAiTasks} tasks; the served expert should pass them all`,
    );

  // The client alone, 64 concurrent requests: a real first turn of a task (system prompt, tools) answered by the expert.
  const harness = await loadHarness(sampleHarnessDirectory());
  const firstTurn = taskFirstTurn(generateTasks({ count: 1, seed: taskSeed, world: { itemCount } })[0], harness);
  const client = createModelClient(teacher);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const modes: Array<[string, Call]> = [
    ['bare node:http', bareHttpCall(url, firstTurn, teacher.model, agent)],
    [
      'openai client',
      async () => {
        const response = await client.chat(firstTurn);
        return response.timings.queueMs + response.timings.e2eMs;
      },
    ],
  ];
  for (const [, call] of modes) await runMode(500, 64, call);
  const results = new Map<string, ModeResult>();
  for (const [name, call] of modes) results.set(name, await runMode(calls, 64, call));
  const bare = results.get('bare node:http') as ModeResult;
  const viaClient = results.get('openai client') as ModeResult;
  await client.close?.();
  agent.destroy();
  child.send('stop');

  const clientFigures = {
    ownP50Ms: percentile(viaClient.ownTimes, 0.5),
    ownP99Ms: percentile(viaClient.ownTimes, 0.99),
    p50Ms: percentile(viaClient.latencies, 0.5),
    p50OverheadVsBareMs: percentile(viaClient.latencies, 0.5) - percentile(bare.latencies, 0.5),
    busyMsPerCall: viaClient.busyMsPerCall,
    busyMsPerCallAboveBare: viaClient.busyMsPerCall - bare.busyMsPerCall,
  };
  console.log(
    `collect stage, in-process (plan + parts + finish, gzip JSONL to a file store), ${taskCount} generated tasks`,
  );
  console.table([
    {
      teacher: 'scripted expert',
      tasks: scripted.output.tasks,
      s: scripted.seconds.toFixed(2),
      'trajectories/s': scripted.trajectoriesPerSecond.toFixed(0),
      'model calls/s': scripted.callsPerSecond.toFixed(0),
      'busy ms/call': scripted.busyMsPerCall.toFixed(3),
    },
    {
      teacher: 'openai → local server (64 in flight)',
      tasks: viaServer.output.tasks,
      s: viaServer.seconds.toFixed(2),
      'trajectories/s': viaServer.trajectoriesPerSecond.toFixed(0),
      'model calls/s': viaServer.callsPerSecond.toFixed(0),
      'busy ms/call': viaServer.busyMsPerCall.toFixed(3),
    },
  ]);
  console.log(
    `openai client overhead per call at 64 concurrent requests (${calls} calls, server in a separate process, zero model delay):`,
  );
  console.log(
    `  own time p50 ${clientFigures.ownP50Ms.toFixed(3)} ms, p99 ${clientFigures.ownP99Ms.toFixed(3)} ms; latency p50 ${clientFigures.p50Ms.toFixed(3)} ms (${clientFigures.p50OverheadVsBareMs.toFixed(3)} ms above bare node:http); ` +
      `event-loop work ${clientFigures.busyMsPerCall.toFixed(3)} ms/call (${clientFigures.busyMsPerCallAboveBare.toFixed(3)} ms above bare node:http)`,
  );
  const round = (value: number) => Number(value.toFixed(3));
  console.log(
    JSON.stringify({
      benchmark: 'collect',
      tasks: taskCount,
      scriptedTrajectoriesPerSecond: round(scripted.trajectoriesPerSecond),
      openAiTrajectoriesPerSecond: round(viaServer.trajectoriesPerSecond),
      openAiStageBusyMsPerCall: round(viaServer.busyMsPerCall),
      client: Object.fromEntries(Object.entries(clientFigures).map(([key, value]) => [key, round(value)])),
    }),
  );
}

if (process.argv[2] === '--serve') {
  void serve(Number(process.argv[3]));
} else {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
