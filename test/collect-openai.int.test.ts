import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { loadEnv } from '../shared/config/env';
import { HatError } from '../shared/errors';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger, type Logger } from '../shared/log/logger';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema, type Task } from '../shared/simulator/tasks/task-schema';
import type { ChatMessage } from '../shared/trajectory/messages';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { systemClock, type AnyStage } from '../queues/stage-kit/define-stage';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { buildStageDeps, planParts } from '../queues/stage-kit/stage-execution';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import type { CollectOutput, CollectPartInput, ReviewEntry } from '../workers/collect/collect-contract';
import { collectStage } from '../workers/collect/processor';

/** The stage as the framework's helpers take it. */
const anyCollectStage = collectStage as AnyStage as Extract<AnyStage, { kind: 'fan-out' }>;
import {
  OpenAiTestServer,
  type ChatResponder,
  type RecordedRequest,
  type ScriptedChatResponse,
} from './support/openai-test-server';
import { loggerInto } from './support/captured-logger';

/**
 * The collect stage with an `openai` teacher against the local OpenAI-compatible test server,
 * whose answers a correct teacher decides (the scripted expert reads the request the server
 * received; the server streams its reply as real chat-completion chunks). Faults the server
 * injects end either in a correct trajectory (the client retried) or in a recorded failure.
 */

const apiKey = 'sk-collect-test-0123456789abcdef';
const apiKeyEnv = 'HAT_COLLECT_TEST_API_KEY';

describe('collect with an OpenAI-compatible teacher (local test server)', () => {
  let directory: string;
  let tasksUri: string;
  let tasks: Task[];
  let expert: ScriptedExpert;
  let server: OpenAiTestServer;
  let logText = '';
  const stores = createStoreCache(loadEnv({}));

  /** The expert answers what the server received; tool-call arguments stream 3 characters a chunk, parallel calls interleaved. */
  const teacherResponder: ChatResponder = async (request: RecordedRequest): Promise<ScriptedChatResponse> => {
    const reply = await expert.chat({ messages: request.body.messages as ChatMessage[], tools: request.body.tools });
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
      argumentFragmentChars: 3,
      contentPieceChars: 5,
      interleaveToolCalls: true,
    };
  };

  const logger = (): Logger => loggerInto((text) => (logText += text), 'debug');

  const teacher = (overrides: Record<string, unknown> = {}) => ({
    adapter: 'openai',
    baseUrl: server.baseUrl,
    model: 'teacher-test',
    apiKeyEnv,
    retryInitialDelayMs: 10,
    retryMaxDelayMs: 50,
    ...overrides,
  });

  async function collect(
    name: string,
    config: Record<string, unknown>,
  ): Promise<{ output: CollectOutput; outDirectory: string }> {
    const outDirectory = join(directory, name);
    const result = await runStageLocally(
      collectStage,
      { tasks: tasksUri, tasksPerPart: 4, ...config },
      {
        store: new FileArtifactStore(outDirectory),
        openObject: stores.openObject,
        runId: name,
        seed: 'openai-it',
        logger: logger(),
      },
    );
    return { output: result.output as CollectOutput, outDirectory };
  }

  /** What the framework hands plan and a part processor, writing under `<directory>/<name>`. */
  function stageDeps(name: string, part?: { index: number; id: string }) {
    return buildStageDeps({
      store: new FileArtifactStore(join(directory, name)),
      outputPrefix: '',
      openObject: stores.openObject,
      runId: name,
      seed: 'openai-it',
      stage: 'collect',
      ...(part ? { part: { index: part.index, id: part.id, count: 1 } } : {}),
      attempt: 1,
      logger: silentLogger(),
      clock: systemClock,
      progress: () => undefined,
      signal: new AbortController().signal,
      services: {},
    });
  }

  async function records<T>(outDirectory: string, kind: string): Promise<T[]> {
    const manifest = await readManifest(new FileArtifactStore(outDirectory), 'manifest.json');
    const lines: T[] = [];
    for (const object of manifest.objects.filter((entry) => entry.kind === kind)) {
      const text = gunzipSync(await readFile(join(outDirectory, object.key))).toString('utf8');
      for (const line of text.split('\n').filter(Boolean)) lines.push(JSON.parse(line) as T);
    }
    return lines;
  }

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-collect-openai-'));
    tasks = generateTasks({
      count: 12,
      seed: 'openai-it',
      world: { itemCount: 200 },
      categoryWeights: { comparison: 4, multi_question: 4 },
    });
    tasksUri = pathToFileURL(join(directory, 'tasks.jsonl.gz')).href;
    const { store, key } = stores.openObject(tasksUri);
    await writeJsonl(store, key, tasks, { schema: taskSchema });
    expert = new ScriptedExpert({ tasks, harnesses: [await loadHarness(sampleHarnessDirectory())] });
    process.env[apiKeyEnv] = apiKey;
    server = await OpenAiTestServer.start({
      responder: teacherResponder,
      splitEvents: true,
      requiredApiKey: apiKey,
      models: ['teacher-test'],
    });
  });
  beforeEach(() => {
    server.setResponder(teacherResponder);
    server.resetStats();
  });
  afterAll(async () => {
    await server.close();
    await stores.close();
    delete process.env[apiKeyEnv];
    await rm(directory, { recursive: true, force: true });
  });

  it('assembles streamed tool calls (split arguments, two in parallel) into the trajectories the scripted teacher plays, sending the key in the Authorization header', async () => {
    const scripted = await collect('scripted', {});
    const viaServer = await collect('openai', { teacher: teacher() });
    expect(viaServer.output).toMatchObject({ tasks: 12, accepted: 12, review: 0, acceptanceRate: 1 });

    const expected = await records<Trajectory>(scripted.outDirectory, 'trajectories');
    const served = await records<Trajectory>(viaServer.outDirectory, 'trajectories');
    expect(served.map((trajectory) => trajectory.messages)).toEqual(expected.map((trajectory) => trajectory.messages));
    expect(served.map((trajectory) => trajectory.reward)).toEqual(expected.map((trajectory) => trajectory.reward));
    const parallel = served
      .flatMap((trajectory) => trajectory.messages)
      .filter((message) => message.role === 'assistant' && (message.tool_calls?.length ?? 0) >= 2);
    expect(parallel.length).toBeGreaterThan(0);
    expect(served[0].model).toEqual({ provider: 'openai', id: 'teacher-test', sampling: {}, simulated: false });
    expect(
      served.every((trajectory) => trajectory.calls.every((call) => call.completionTokens > 0 && call.attempts === 1)),
    ).toBe(true);
    expect(server.chatRequests.every((request) => request.headers.authorization === `Bearer ${apiKey}`)).toBe(true);
  });

  it('retries a 429 (after its Retry-After), a 500, a stream dropped mid-way and a response slower than the timeout, and records the calls that succeeded', async () => {
    server.injectFault({ kind: 'status', status: 429, retryAfter: '1' });
    server.injectFault({ kind: 'status', status: 500 });
    server.injectFault({ kind: 'drop-mid-stream', afterChunks: 2 });
    server.injectFault({ kind: 'slow-first-byte', delayMs: 1500 });
    const { output, outDirectory } = await collect('faults', {
      teacher: teacher({ timeoutMs: 400, maxRetries: 4 }),
      concurrency: 1,
      tasksPerPart: 12,
    });
    expect(output).toMatchObject({ tasks: 12, accepted: 12, review: 0 });
    const requests = server.chatRequests;
    // The second request waited out the 429's Retry-After.
    expect(requests[1].receivedAt - requests[0].receivedAt).toBeGreaterThanOrEqual(990);
    const served = await records<Trajectory>(outDirectory, 'trajectories');
    expect(served[0].calls[0].attempts).toBe(5);
    expect(served.flatMap((trajectory) => trajectory.calls).filter((call) => call.attempts > 1)).toHaveLength(1);
    const expected = await records<Trajectory>(join(directory, 'scripted'), 'trajectories');
    expect(served.map((trajectory) => trajectory.messages)).toEqual(expected.map((trajectory) => trajectory.messages));
    const stats = JSON.parse(await readFile(join(outDirectory, 'stats.json'), 'utf8')) as {
      totals: { attempts: number; calls: number };
    };
    expect(stats.totals.attempts - stats.totals.calls).toBe(4);
  });

  it('records an episode whose retries are spent as model_error, lists its task for review, and keeps the rest of the part', async () => {
    server.injectFault({ kind: 'status', status: 500, message: 'engine overloaded' }, 3);
    const { output, outDirectory } = await collect('one-failure', {
      teacher: teacher({ maxRetries: 2 }),
      concurrency: 1,
      tasksPerPart: 12,
    });
    expect(output).toMatchObject({ tasks: 12, accepted: 11, rejected: 1, review: 1 });
    const review = await records<ReviewEntry>(outDirectory, 'review');
    expect(review).toEqual([
      {
        taskId: tasks[0].id,
        category: tasks[0].category,
        attempts: 1,
        reasons: [
          expect.objectContaining({
            sampleIndex: 0,
            status: 'model_error',
            reason: 'model_error',
            detail: expect.stringMatching(
              /^\[MODEL_UNAVAILABLE\] .* failed 3 attempts; last: \[MODEL_SERVER_ERROR\] .*engine overloaded/,
            ),
          }),
        ],
      },
    ]);
    const rejected = await records<Trajectory>(outDirectory, 'rejected');
    expect(
      rejected.map((trajectory) => [trajectory.taskId, trajectory.status, trajectory.meta.rejection?.reason]),
    ).toEqual([[tasks[0].id, 'model_error', 'model_error']]);
    expect(await readFile(join(outDirectory, 'report.html'), 'utf8')).toContain(tasks[0].id);
  });

  it('writes episodes in task order while playing at most 4 tasks per lane past the first one not yet written', async () => {
    // Task 0's first answer waits until the other lane has sent nothing for a second: it either
    // ran through every task or stopped to wait for task 0 to be written.
    let requests = 0;
    let answeredAt = 0;
    server.setResponder(async (request) => {
      if (requests++ === 0) {
        const started = Date.now();
        while (Date.now() - Math.max(...server.chatRequests.map((each) => each.receivedAt)) < 1000) {
          if (Date.now() - started > 20_000) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        answeredAt = Date.now();
      }
      return teacherResponder(request);
    });
    const { output, outDirectory } = await collect('ordered', { teacher: teacher(), concurrency: 2, tasksPerPart: 12 });
    expect(output).toMatchObject({ tasks: 12, accepted: 12 });
    const served = await records<Trajectory>(outDirectory, 'trajectories');
    expect(served.map((trajectory) => trajectory.taskId)).toEqual(tasks.map((task) => task.id));
    // Meanwhile the other lane played tasks 1-7 (4 tasks a lane past task 0, not yet written) and
    // waited, instead of running through all 11 with their episodes held in memory.
    const episodesStarted = server.chatRequests.filter(
      (request) =>
        request.receivedAt < answeredAt &&
        !(request.body.messages as ChatMessage[]).some((message) => message.role === 'assistant'),
    );
    expect(episodesStarted).toHaveLength(8);
  }, 60_000);

  it('ends an episode over episodeTimeoutMs with status timeout and lists its task for review', async () => {
    let requests = 0;
    server.setResponder(async (request) => ({
      ...(await teacherResponder(request)),
      ...(requests++ === 0 ? { timing: { ttftMs: 2000 } } : {}),
    }));
    const { output, outDirectory } = await collect('episode-timeout', {
      teacher: teacher(),
      episodeTimeoutMs: 500,
      concurrency: 1,
      tasksPerPart: 12,
    });
    expect(output).toMatchObject({ tasks: 12, accepted: 11, review: 1 });
    const [entry] = await records<ReviewEntry>(outDirectory, 'review');
    expect(entry).toMatchObject({ taskId: tasks[0].id, reasons: [{ status: 'timeout', reason: 'timeout' }] });
  });

  it('fails a part whose teacher is down (retryable, with its Retry-After), stops early, and the retried part succeeds once the server is back', async () => {
    server.setResponder(() => ({ fault: { kind: 'status', status: 503, retryAfter: '2', message: 'no replicas' } }));
    const config = collectStage.input.parse({
      tasks: tasksUri,
      tasksPerPart: 12,
      concurrency: 1,
      teacher: teacher({ maxRetries: 0 }),
    });
    const [planned] = await planParts(anyCollectStage, config, stageDeps('down'));
    const failure = await collectStage
      .createProcessor(stageDeps('down', planned))(planned.input as CollectPartInput)
      .catch((error: unknown) => error);
    expect(HatError.isInstance(failure)).toBe(true);
    expect(failure).toMatchObject({ code: 'TEACHER_UNAVAILABLE', retryable: true, retryAfterMs: 2000 });
    expect((failure as Error).message).toMatch(
      /every one of the 4 episodes played failed to reach the teacher \(the rest were not started\)/,
    );
    // The breaker stopped after 4 episodes of 12; the part wrote no object (its task slice is the plan's).
    expect(server.chatRequests).toHaveLength(4);
    const objects: string[] = [];
    for await (const object of new FileArtifactStore(join(directory, 'down')).list('')) objects.push(object.key);
    expect(objects).toEqual(['tasks/part-00000.jsonl.gz']);

    // In a stage run the part is retried (after the stage's backoff): the server is back by then.
    server.resetStats();
    let faulted = 0;
    server.setResponder((request) =>
      faulted++ < 4 ? { fault: { kind: 'status', status: 503, message: 'no replicas' } } : teacherResponder(request),
    );
    const { output } = await collect('recovered', {
      tasksPerPart: 12,
      concurrency: 1,
      teacher: teacher({ maxRetries: 0 }),
    });
    expect(output).toMatchObject({ tasks: 12, accepted: 12, review: 0 });
    expect(faulted).toBeGreaterThan(4);
  });

  it('fails for good when the teacher refuses every request (a wrong API key), without echoing the key it was sent', async () => {
    process.env[apiKeyEnv] = 'sk-wrong-key-9876543210';
    try {
      const error = await collect('refused', { tasksPerPart: 12, teacher: teacher({ maxRetries: 0 }) }).catch(
        (caught: unknown) => caught,
      );
      expect(error).toMatchObject({ code: 'TEACHER_REJECTED', retryable: false, exitCode: 2 });
      expect((error as Error).message).toContain('HTTP 401');
      expect((error as Error).message).toContain('check the API key named by apiKeyEnv/apiKeyFile');
      expect((error as Error).message).not.toContain('sk-wrong-key-9876543210');
      expect(server.chatRequests).toHaveLength(12);
    } finally {
      process.env[apiKeyEnv] = apiKey;
    }
  });

  it('keeps the API key out of job data, every artifact and every log line of the runs above', async () => {
    const config = collectStage.input.parse({ tasks: tasksUri, teacher: teacher() });
    const jobData = JSON.stringify(await planParts(anyCollectStage, config, stageDeps('job-data')));
    expect(jobData).toContain(apiKeyEnv);
    expect(jobData).not.toContain(apiKey);

    const files = (await readdir(directory, { recursive: true, withFileTypes: true })).filter((entry) =>
      entry.isFile(),
    );
    expect(files.length).toBeGreaterThan(50);
    for (const file of files) {
      const bytes = await readFile(join(file.parentPath, file.name));
      const text = file.name.endsWith('.gz') ? gunzipSync(bytes).toString('utf8') : bytes.toString('utf8');
      expect(text).not.toContain(apiKey);
    }
    // The logs were captured (the retries above were logged) and hold no key.
    expect(logText).toContain('model call failed; retrying');
    expect(logText).not.toContain(apiKey);
  });
});
