import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { silentLogger } from '../shared/log/logger';
import { Rng } from '../shared/random/rng';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema, type Task } from '../shared/simulator/tasks/task-schema';
import type { ChatMessage } from '../shared/trajectory/messages';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { watchRun, type RunStatus } from '../queues/runs/run-control';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { getStage } from '../queues/stage-kit/stage-registry';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { runHatInProcess } from './support/hat-in-process';
import {
  OpenAiTestServer,
  type ChatResponder,
  type RecordedRequest,
  type ScriptedChatResponse,
} from './support/openai-test-server';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';
import { loggerInto } from './support/captured-logger';
import { scanKeyBatches } from '../queues/bullmq/redis-connection';

/**
 * Model server faults through real queues: 500s, 429s and dropped streams are retried with
 * backoff and leave the output as a clean run would; a server that keeps failing one part's
 * requests fails only that part, with the reason in `hat runs show --json`. The teacher's API
 * key never reaches Redis, artifacts or logs, and configs cannot write outside the run's prefix.
 */
describe('model server faults and secrets', () => {
  const apiKey = 'sk-ops-faults-7f3c9a1e5b2d4c6a8e0f';
  const apiKeyEnv = 'HAT_OPS_FAULTS_TEACHER_KEY';
  let kit: QueueTestKit;
  let server: OpenAiTestServer;
  let tasks: Task[];
  let tasksUri: string;
  let expert: ScriptedExpert;
  let logText = '';
  let failingMessages = new Set<string>();
  const faultRng = new Rng('ops-faults-model');
  let faultRate = 0;
  let transientFaults = 0;

  const expertAnswer = async (request: RecordedRequest): Promise<ScriptedChatResponse> => {
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
      argumentFragmentChars: 4,
    };
  };
  /** Seeded transient faults at `faultRate`; requests of the failing part's tasks always 500. */
  const responder: ChatResponder = async (request) => {
    const firstUser = String(
      (request.body.messages as ChatMessage[]).find((message) => message.role === 'user')?.content ?? '',
    );
    // Hooks may append a suffix to the viewer's message.
    if ([...failingMessages].some((message) => firstUser.startsWith(message)))
      return { fault: { kind: 'status', status: 500, message: 'engine dead for this shard' } };
    const draw = faultRng.next();
    if (draw < faultRate) transientFaults++;
    if (draw < faultRate / 3) return { fault: { kind: 'status', status: 500, message: 'overloaded' } };
    if (draw < (2 * faultRate) / 3) return { fault: { kind: 'status', status: 429, retryAfter: '0' } };
    if (draw < faultRate) return { fault: { kind: 'drop-mid-stream', afterChunks: 2 } };
    return expertAnswer(request);
  };
  const teacher = {
    adapter: 'openai',
    model: 'teacher-test',
    apiKeyEnv,
    maxRetries: 6,
    retryInitialDelayMs: 5,
    retryMaxDelayMs: 20,
  };

  beforeAll(async () => {
    kit = await createQueueTestKit();
    tasks = generateTasks({ count: 12, seed: 'ops-faults', world: { itemCount: 200 } });
    tasksUri = `${kit.artifactsRoot}/inputs/tasks.jsonl.gz`;
    await writeJsonl(kit.store, 'inputs/tasks.jsonl.gz', tasks, { schema: taskSchema });
    expert = new ScriptedExpert({ tasks, harnesses: [await loadHarness(sampleHarnessDirectory())] });
    process.env[apiKeyEnv] = apiKey;
    server = await OpenAiTestServer.start({ responder, requiredApiKey: apiKey, models: ['teacher-test'] });
    const logger = loggerInto((text) => (logText += text), 'debug');
    await kit.startWorkers({ queues: ['collect', 'runs'], logger });
  });
  afterAll(async () => {
    await kit.cleanup();
    await server.close();
    delete process.env[apiKeyEnv];
  });

  const runCollect = async (runId: string, extra: Record<string, unknown> = {}): Promise<RunStatus> => {
    const config = {
      tasks: tasksUri,
      tasksPerPart: 4,
      concurrency: 2,
      teacher: { ...teacher, baseUrl: server.baseUrl },
      ...extra,
    };
    await enqueueRun(kit.context, planRun({ runId, stages: { collect: config } }, { env: kit.env, now: new Date() }));
    return watchRun(kit.context, runId, { intervalMs: 200 });
  };
  const trajectories = async (store: FileArtifactStore, manifestKey: string): Promise<Trajectory[]> => {
    const manifest = await readManifest(store, manifestKey);
    const records: Trajectory[] = [];
    for (const object of manifest.objects.filter((entry) => entry.kind === 'trajectories')) {
      for (const line of gunzipSync(await store.getBuffer(object.key))
        .toString('utf8')
        .split('\n')
        .filter(Boolean))
        records.push(JSON.parse(line) as Trajectory);
    }
    return records;
  };

  it('retries 500s, 429s and dropped streams with backoff; the trajectories equal the scripted teacher playing directly', async () => {
    faultRate = 0.3;
    server.resetStats();
    const status = await runCollect('model-flaky');
    expect([status.state, status.error]).toEqual(['completed', undefined]);
    expect(transientFaults).toBeGreaterThan(5);

    const reference = new FileArtifactStore(join(kit.artifactsDirectory, 'reference'));
    const stores = createStoreCache({});
    await runStageLocally(
      getStage('collect'),
      { tasks: tasksUri, tasksPerPart: 4 },
      { store: reference, openObject: stores.openObject, runId: 'reference', logger: silentLogger() },
    );
    await stores.close();
    const served = await trajectories(kit.store as FileArtifactStore, 'runs/model-flaky/collect/manifest.json');
    const expected = await trajectories(reference, 'manifest.json');
    expect(served.map((trajectory) => trajectory.messages)).toEqual(expected.map((trajectory) => trajectory.messages));
    expect(served.map((trajectory) => trajectory.reward.total)).toEqual(
      expected.map((trajectory) => trajectory.reward.total),
    );
    // Some calls needed more than one attempt, and the run still equals the clean one.
    const retried = served.flatMap((trajectory) => trajectory.calls).filter((call) => call.attempts > 1);
    expect(retried.length).toBeGreaterThan(0);
  });

  it('fails only the part whose requests keep failing, with the reason in `hat runs show --json`', async () => {
    faultRate = 0;
    // Part 1 plays tasks 4..7; their opening messages must not open another part's task.
    const opening = (task: Task) => task.turns[0]?.message ?? '';
    failingMessages = new Set(tasks.slice(4, 8).map(opening));
    expect(
      tasks.filter(
        (task, index) =>
          (index < 4 || index >= 8) && [...failingMessages].some((message) => opening(task).startsWith(message)),
      ),
    ).toEqual([]);

    const runId = 'model-down';
    await enqueueRun(
      kit.context,
      planRun(
        {
          runId,
          stages: {
            collect: {
              tasks: tasksUri,
              tasksPerPart: 4,
              concurrency: 2,
              teacher: { ...teacher, baseUrl: server.baseUrl, maxRetries: 1 },
            },
          },
        },
        { env: kit.env, now: new Date() },
      ),
    );
    // The part is retried with the stage's backoff (seconds); promote each wait so the test does not sleep through it.
    const failed = await waitFor(async () => {
      for (const job of await kit.context.queue('collect').getDelayed()) await job.promote().catch(() => undefined);
      const state = await kit.context.runsQueue.getJob(runId).then((job) => job?.getState());
      return state === 'failed' ? state : undefined;
    }, 30_000);
    expect(failed).toBe('failed');

    const shown = await runHatInProcess(
      { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' },
      'runs',
      'show',
      runId,
      '--json',
    );
    const status = JSON.parse(shown.stdout) as RunStatus;
    expect(status.state).toBe('failed');
    const collect = status.stages[0];
    expect(collect).toMatchObject({ name: 'collect', state: 'failed', partsTotal: 3, partsDone: 2, partsFailed: 1 });
    expect(collect?.error).toMatch(
      /^\[TEACHER_UNAVAILABLE\] .*\(job collect\/model-down\.collect\.part-00001\.[0-9a-f]{12}\)$/,
    );
    const part = (await kit.context.queue('collect').getFailed()).find(
      (job) => job.name === 'part' && job.id?.startsWith(`${runId}.collect.part-00001`),
    );
    expect(part?.attemptsMade).toBe(5);
    // The other parts are done and kept.
    expect(await kit.store.head(`runs/${runId}/collect/_state/part-00000.json`)).toBeDefined();
    expect(await kit.store.head(`runs/${runId}/collect/_state/part-00002.json`)).toBeDefined();
    expect(await kit.store.head(`runs/${runId}/collect/_state/part-00001.json`)).toBeUndefined();
    failingMessages = new Set();
  });

  it('keeps the API key out of Redis, artifacts and logs, and refuses configs that would write outside the run', async () => {
    // Redis: every key and value of this test's prefix.
    const redis = kit.context.connection;
    let keys = 0;
    for await (const batch of scanKeyBatches(redis, `${kit.prefix}:*`)) {
      for (const key of batch) {
        keys++;
        const type = await redis.type(key);
        const value =
          type === 'string'
            ? await redis.get(key)
            : type === 'hash'
              ? await redis.hgetall(key)
              : type === 'list'
                ? await redis.lrange(key, 0, -1)
                : type === 'set'
                  ? await redis.smembers(key)
                  : type === 'zset'
                    ? await redis.zrange(key, '0', '-1')
                    : type === 'stream'
                      ? await redis.xrange(key, '-', '+')
                      : null;
        expect([key, JSON.stringify(value).includes(apiKey)]).toEqual([key, false]);
      }
    }
    expect(keys).toBeGreaterThan(20);

    // Artifacts: every object, gzip opened.
    const files: string[] = [];
    const walk = async (directory: string) => {
      for (const entry of await readdir(directory, { withFileTypes: true })) {
        const path = join(directory, entry.name);
        if (entry.isDirectory()) await walk(path);
        else files.push(path);
      }
    };
    await walk(kit.artifactsDirectory);
    for (const file of files) {
      const bytes = await readFile(file);
      const text = (file.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf8');
      expect([file, text.includes(apiKey)]).toEqual([file, false]);
    }
    expect(files.length).toBeGreaterThan(20);
    // The server did get it, in the header only.
    expect(server.requests.some((request) => request.headers.authorization === `Bearer ${apiKey}`)).toBe(true);

    // Logs (debug level, every worker line of both runs).
    expect(logText.split('\n').length).toBeGreaterThan(20);
    expect(logText).toContain('job attempt failed; will retry');
    expect(logText.includes(apiKey)).toBe(false);

    // Object keys come from the run id and stage name only: a config cannot choose or climb out.
    const config = join(kit.artifactsDirectory, 'escape.yaml');
    await writeFile(
      config,
      [
        'runId: escape',
        'stages:',
        '  collect:',
        '    generate: { count: 2, seed: 1 }',
        '    out: /etc/hat',
        `  noop: { inputs: ["${kit.artifactsRoot}/runs/escape/../../../etc/passwd"] }`,
        '',
      ].join('\n'),
    );
    const refused = await runHatInProcess(
      { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' },
      'run',
      config,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `${config}: line 5: stages.collect.out: a run decides where stages write (runs/<runId>/<stage>/ under the run's artifacts); remove "out"`,
    );
    expect(refused.stderr).toContain(
      `${config}: line 6: stages.noop.inputs[0]: "${kit.artifactsRoot}/runs/escape/../../../etc/passwd" has a "." or ".." segment`,
    );
    expect(await kit.context.runsQueue.getJob('escape')).toBeUndefined();
    const badRunId = await runHatInProcess(
      { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' },
      'run',
      config,
      '--run-id',
      '../escape',
    );
    expect(badRunId.code).toBe(2);
    expect(badRunId.stderr).toContain('run id "../escape" is not allowed');
  });
});
