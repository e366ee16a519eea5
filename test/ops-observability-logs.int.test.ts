import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema } from '../shared/simulator/tasks/task-schema';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import type { ChatMessage } from '../shared/trajectory/messages';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { OpenAiTestServer, type ChatResponder } from './support/openai-test-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';
import { loggerInto } from './support/captured-logger';

/**
 * Structured logs of a worker: every line a job emits names its run, stage, part and job, and
 * a teacher's API key never reaches a log line, even when the server echoes it in an error.
 */

const apiKey = 'sk-ops-log-test-5f0c9a7e1d2b4c6a';
const apiKeyEnv = 'HAT_OPS_LOG_TEST_API_KEY';

interface LogLine {
  level: number;
  msg: string;
  runId?: string;
  stage?: string;
  part?: string;
  jobId?: string;
  queue?: string;
  reason?: string;
}

describe('worker logs', () => {
  let kit: QueueTestKit;
  let server: OpenAiTestServer;
  let logText = '';
  const lines = (): LogLine[] =>
    logText
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as LogLine);

  beforeAll(async () => {
    process.env[apiKeyEnv] = apiKey;
  });
  afterAll(() => {
    delete process.env[apiKeyEnv];
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
    logText = '';
  });
  afterEach(async () => {
    await server?.close();
    await kit.cleanup();
  });

  it('carries run, stage, part and job ids on every job line and never shows the teacher API key', async () => {
    const tasks = generateTasks({ count: 2, seed: 'ops-logs', world: { itemCount: 50 } });
    const tasksKey = 'inputs/tasks.jsonl.gz';
    await writeJsonl(kit.store, tasksKey, tasks, { schema: taskSchema });
    const expert = new ScriptedExpert({ tasks, harnesses: [await loadHarness(sampleHarnessDirectory())] });
    // Down (echoing the key it was sent, as some servers do) until the part's first attempt has
    // failed; then a correct teacher.
    const answering: ChatResponder = async (request) => {
      if (!logText.includes('job attempt failed'))
        return { fault: { kind: 'status', status: 503, message: `overloaded; rejected request with key ${apiKey}` } };
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
      };
    };
    server = await OpenAiTestServer.start({ responder: answering, requiredApiKey: apiKey, models: ['teacher-test'] });

    const logger = loggerInto((text) => (logText += text), 'debug');
    await kit.startWorkers({ queues: ['collect', 'runs'], logger });
    const teacher = {
      adapter: 'openai',
      baseUrl: server.baseUrl,
      model: 'teacher-test',
      apiKeyEnv,
      maxRetries: 1,
      retryInitialDelayMs: 10,
      retryMaxDelayMs: 20,
    };
    const plan = planRun(
      {
        runId: 'logs',
        stages: { collect: { tasks: [kit.store.uriOf(tasksKey)], tasksPerPart: 2, concurrency: 1, teacher } },
      },
      { env: kit.env, now: new Date() },
    );
    await enqueueRun(kit.context, plan);
    const status = await watchRun(kit.context, 'logs', { intervalMs: 100 });
    expect(status.state).toBe('completed');

    // The key went over the wire (the server required it) and came back in error bodies...
    expect(server.chatRequests.every((request) => request.headers.authorization === `Bearer ${apiKey}`)).toBe(true);
    // ...but no log line shows it.
    expect(logText).not.toContain(apiKey);

    const all = lines();
    const stageLines = all.filter((line) => line.queue === 'collect' || line.stage === 'collect');
    expect(stageLines.length).toBeGreaterThan(0);
    for (const line of stageLines) {
      expect(line).toMatchObject({ runId: 'logs', stage: 'collect', jobId: expect.any(String) });
    }
    // Part lines name their part, and the part's id is inside its job id.
    const partLines = stageLines.filter((line) => line.part !== undefined);
    expect(partLines.length).toBeGreaterThan(0);
    for (const line of partLines) expect(line.jobId).toContain(`.${line.part}.`);

    // The processor's own line (the model client's retry), the failed attempt and the completions.
    const retry = all.find((line) => line.msg === 'model call failed; retrying');
    expect(retry).toMatchObject({
      runId: 'logs',
      stage: 'collect',
      part: 'part-00000',
      jobId: expect.stringContaining('logs.collect.part-00000.'),
    });
    const failedAttempt = all.find((line) => line.msg === 'job attempt failed; will retry');
    expect(failedAttempt).toMatchObject({
      queue: 'collect',
      runId: 'logs',
      stage: 'collect',
      part: 'part-00000',
      jobId: retry?.jobId,
    });
    expect(failedAttempt?.reason).toMatch(/^\[TEACHER_UNAVAILABLE\]/);
    expect(all.filter((line) => line.msg === 'job completed').map((line) => [line.queue, line.part ?? null])).toEqual(
      expect.arrayContaining([
        ['collect', 'part-00000'],
        ['collect', null],
        ['runs', null],
      ]),
    );
  });

  it('refuses a teacher config that holds the key itself, without repeating the key', () => {
    const teacher = { adapter: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'teacher-test', apiKey };
    let message = '';
    try {
      planRun(
        { runId: 'inline-key', stages: { collect: { generate: { count: 1, seed: 1 }, teacher } } },
        { env: kit.env, now: new Date() },
      );
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/collect\.teacher\.apiKey/);
    expect(message).not.toContain(apiKey);
  });

  it('redacts secrets nested in logged objects (configs, headers, env)', () => {
    const logger = loggerInto((text) => (logText += text));
    logger.child({ runId: 'r' }).info(
      {
        config: { stages: { collect: { teacher: { apiKey: 'secret-1' } } } },
        request: { headers: { authorization: 'Bearer secret-2' } },
        env: { AWS_SECRET_ACCESS_KEY: 'secret-3', HAT_DASHBOARD_TOKEN: 'secret-4' },
        s3: { credentials: { secretAccessKey: 'secret-5', sessionToken: 'secret-6' } },
      },
      'settings',
    );
    logger.flush();
    const [line] = lines();
    expect(logText).not.toMatch(/secret-\d/);
    expect(line).toMatchObject({
      runId: 'r',
      msg: 'settings',
      config: { stages: { collect: { teacher: { apiKey: '[redacted]' } } } },
    });
  });
});
