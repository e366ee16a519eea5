import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { startLocalS3Server, type LocalS3Server } from '../shared/artifacts/local-s3-server';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema } from '../shared/simulator/tasks/task-schema';
import { freePort } from './support/free-port';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * `hat run` checks the whole run before it enqueues anything: inputs that must exist (S3, file
 * URIs, local paths), model servers that must answer with the configured key and model, and a
 * distillation student and teacher that must share a tokenizer. Every problem in one pass, exit 2.
 */
describe('hat run preflight', () => {
  let s3: LocalS3Server;
  let server: OpenAiTestServer;
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  const apiKey = 'sk-preflight-correct-key-1234';
  const wrongKey = 'sk-preflight-WRONG-key-9876';

  beforeAll(async () => {
    s3 = await startLocalS3Server({ bucket: 'preflight' });
    server = await OpenAiTestServer.start({ models: ['teacher-test'], requiredApiKey: apiKey });
  });
  afterAll(async () => {
    await server.close();
    await s3.stop();
  });
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-preflight-'));
    env = {
      ...s3.env,
      HAT_REDIS_PREFIX: kit.prefix,
      HAT_ARTIFACTS: `s3://preflight/${kit.prefix}`,
      HAT_LOG_LEVEL: 'silent',
      PREFLIGHT_KEY: apiKey,
    };
  });
  afterEach(async () => {
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const writeConfig = async (name: string, lines: string[]) => {
    const file = join(directory, name);
    await writeFile(file, `${lines.join('\n')}\n`);
    return file;
  };

  it('reports missing inputs, unreachable or refusing servers, unserved models and a tokenizer mismatch in one pass, and enqueues nothing', async () => {
    const down = await freePort();
    const config = await writeConfig('bad.yaml', [
      'runId: preflight-bad',
      'stages:',
      '  collect:',
      `    tasks: ["s3://preflight/${kit.prefix}/tasks/none.jsonl.gz", "file://${directory}/missing.jsonl.gz"]`,
      `    harness: ${directory}/no-such-harness`,
      `    teacher: { adapter: openai, baseUrl: "${server.baseUrl}", model: teacher-test, apiKeyEnv: PREFLIGHT_WRONG_KEY }`,
      '  replay:',
      '    inputs: ["${stages.collect.manifestUri}"]',
      `    target: { adapter: openai, baseUrl: "http://127.0.0.1:${down}/v1", model: target }`,
      '  rl:',
      '    generate: { count: 2, seed: 1 }',
      `    policy: { adapter: openai, baseUrl: "${server.baseUrl}", model: not-served, apiKeyEnv: PREFLIGHT_KEY }`,
      '  distill:',
      '    student: { adapter: dummy, tokenizer: qwen3 }',
      '    teacher: { adapter: dummy, tokenizer: llama3_1 }',
    ]);
    const result = await runHatInProcess({ ...env, PREFLIGHT_WRONG_KEY: wrongKey }, 'run', config);
    expect(result.code).toBe(2);
    const lines = result.stderr.split('\n');
    expect(lines[0]).toBe(`hat: [BAD_RUN_CONFIG] ${config} has problems; fix them and run again (7 problems):`);
    expect(result.stderr).toContain(
      `${config}: line 4: stages.collect.tasks[0]: s3://preflight/${kit.prefix}/tasks/none.jsonl.gz does not exist (no object, and no objects under it as a prefix)`,
    );
    expect(result.stderr).toContain(
      `${config}: line 4: stages.collect.tasks[1]: file://${directory}/missing.jsonl.gz does not exist`,
    );
    expect(result.stderr).toContain(
      `${config}: line 5: stages.collect.harness: ${directory}/no-such-harness does not exist`,
    );
    expect(result.stderr).toContain(
      `${config}: line 6: stages.collect.teacher.apiKeyEnv: ${server.url}/v1/models refused the API key from $PREFLIGHT_WRONG_KEY (HTTP 401); check the key`,
    );
    expect(result.stderr).toMatch(
      new RegExp(
        `line 9: stages\\.replay\\.target\\.baseUrl: http://127\\.0\\.0\\.1:${down}/v1 does not answer GET /v1/models \\(ECONNREFUSED\\)`,
      ),
    );
    expect(result.stderr).toContain(
      `line 12: stages.rl.policy.model: the server at ${server.baseUrl} does not serve "not-served" (it lists: teacher-test); fix model`,
    );
    expect(result.stderr).toMatch(
      /line 15: stages\.distill\.teacher: the teacher \(dummy model \(tokenizer llama3_1\), tokenizer fingerprint [0-9a-f]{16}…\) and the student \(dummy model \(tokenizer qwen3\), [0-9a-f]{16}…\) do not share a tokenizer/,
    );
    // The server echoes a refused key in its error body; none of it reaches the operator.
    expect(result.stderr).not.toContain(wrongKey);
    expect(await kit.context.runsQueue.count()).toBe(0);

    // Offline planning: the servers are not asked; inputs are still checked.
    const offline = await runHatInProcess(
      { ...env, PREFLIGHT_WRONG_KEY: wrongKey },
      'run',
      config,
      '--skip-endpoint-checks',
    );
    expect(offline.code).toBe(2);
    expect(offline.stderr).toContain('(4 problems)');
    expect(offline.stderr).not.toContain('/v1/models');
    expect(await kit.context.runsQueue.count()).toBe(0);
  });

  it('enqueues a run whose inputs exist and whose servers serve its models, noting what only the stage can check', async () => {
    server.resetStats();
    const store = createArtifactStore(`s3://preflight/${kit.prefix}`, s3.env);
    try {
      await writeJsonl(store, 'tasks/live.jsonl.gz', generateTasks({ count: 3, seed: 'preflight' }), {
        schema: taskSchema,
      });
    } finally {
      await store.close();
    }
    const config = await writeConfig('good.yaml', [
      'runId: preflight-ok',
      'stages:',
      '  collect:',
      `    tasks: s3://preflight/${kit.prefix}/tasks/live.jsonl.gz`,
      '    harness: examples/harness/live-host',
      `    teacher: { adapter: openai, baseUrl: "${server.baseUrl}", model: teacher-test, apiKeyEnv: PREFLIGHT_KEY }`,
      '  distill:',
      '    student: { adapter: dummy, tokenizer: qwen3 }',
      `    teacher: { adapter: vllm, baseUrl: "${server.baseUrl}", model: teacher-test, apiKeyEnv: PREFLIGHT_KEY }`,
    ]);
    const result = await runHatInProcess(env, 'run', config, '--json');
    expect(result.stderr).toBe(
      `note: ${config}: line 9: stages.distill.teacher: tokenizer agreement of dummy model (tokenizer qwen3) and vllm teacher ${server.baseUrl} is checked when the stage plans (the distill stage probes the scoring endpoint); give teacher.tokenizerFingerprint to check it here\n`,
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      runId: 'preflight-ok',
      enqueued: true,
      stages: ['collect', 'distill'],
    });
    // One question per server, model and key, however many stages name them; the key sent along.
    const asked = server.requests.filter((request) => request.path === '/v1/models');
    expect(asked.map((request) => request.headers.authorization)).toEqual([`Bearer ${apiKey}`]);
  });

  it('reads the old engine: spelling of a model config as adapter:, with one warning naming the line, path and new spelling; refuses engine and adapter that disagree', async () => {
    const old = await writeConfig('old-spelling.yaml', [
      'runId: preflight-old-spelling',
      'stages:',
      '  distill:',
      '    student: { engine: dummy, tokenizer: qwen3 }',
      '    teacher: { engine: dummy, tokenizer: qwen3, layers: 4 }',
      '  rl:',
      '    generate: { count: 2, seed: 1 }',
      `    policy: { engine: vllm, baseUrl: "${server.baseUrl}", model: teacher-test, apiKeyEnv: PREFLIGHT_KEY }`,
    ]);
    const result = await runHatInProcess(env, 'run', old, '--json');
    expect(result.stderr.split('\n').filter((line) => line.startsWith('warning: '))).toEqual([
      `warning: ${old}: line 4: stages.distill.student.engine: engine: dummy is the old spelling of adapter; write adapter: dummy`,
      `warning: ${old}: line 5: stages.distill.teacher.engine: engine: dummy is the old spelling of adapter; write adapter: dummy`,
      `warning: ${old}: line 8: stages.rl.policy.engine: engine: vllm is the old spelling of adapter; write adapter: vllm`,
    ]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ enqueued: true, stages: ['distill', 'rl'] });
    // Enqueued as the new spelling: workers see adapter, never engine.
    const planned = (await kit.context.runsQueue.getJob('preflight-old-spelling'))?.data.plan.stages as Array<{
      name: string;
      input: { student: unknown };
    }>;
    const distill = planned.find((stage) => stage.name === 'distill')!.input;
    expect(distill.student).toMatchObject({ adapter: 'dummy', tokenizer: 'qwen3' });
    expect(distill.student).not.toHaveProperty('engine');

    const conflicting = await writeConfig('both-spellings.yaml', [
      'runId: preflight-both-spellings',
      'stages:',
      '  distill:',
      '    student: { engine: dummy, adapter: onnx, modelDir: /models/student }',
      '    teacher: { adapter: dummy }',
    ]);
    const refused = await runHatInProcess(env, 'run', conflicting, '--skip-endpoint-checks');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `${conflicting}: line 4: stages.distill.student.engine: gives engine: dummy and adapter: onnx; engine is the old spelling of adapter, so say one: remove engine (or write adapter: dummy)`,
    );
    expect(await kit.context.runsQueue.getJob('preflight-both-spellings')).toBeUndefined();
  });
});
