import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchRun } from '../queues/runs/run-control';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { readManifest } from '../shared/artifacts/manifest';
import type { EvalResult } from '../workers/eval/eval-part';
import type { EvalScores } from '../workers/eval/eval-scores';
import { freePort } from './support/free-port';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * A judge is optional (#33): `hat run` used to refuse a whole run at preflight (BAD_RUN_CONFIG)
 * when the eval's judge did not answer. Now it warns and the run goes on; the judge's scores are
 * missing, each item with the reason, and the rule scores are what they would be.
 */
describe('hat run with the eval judge down', () => {
  let kit: QueueTestKit;
  let server: OpenAiTestServer;
  let directory: string;
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-judge-down-'));
    server = await OpenAiTestServer.start({
      models: ['model'],
      responder: () => ({ content: 'we sell warm jackets and soft scarves and every order ships the same day' }),
    });
  });
  afterEach(async () => {
    await server.close();
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  it('warns at preflight, runs, and leaves judge scores missing with the reason', async () => {
    const judgePort = await freePort();
    const prompts = join(directory, 'custom.jsonl');
    await writeFile(
      prompts,
      [
        {
          id: 'no-commas',
          prompt: 'Describe our store without commas.',
          checks: [{ instruction: 'punctuation:no_comma' }],
        },
        { id: 'pitch', prompt: 'A viewer says the jacket is expensive. Reply.', rubric: 'Honest and warm.' },
      ]
        .map((line) => JSON.stringify(line))
        .join('\n') + '\n',
    );
    const config = join(directory, 'run.yaml');
    await writeFile(
      config,
      [
        'runId: judge-down',
        'stages:',
        '  eval:',
        `    models: [{ label: new, model: { adapter: openai, baseUrl: "${server.baseUrl}", model: model, maxRetries: 0 } }]`,
        `    suites: { custom: { prompts: "${prompts}" } }`,
        `    judge: { model: { adapter: openai, baseUrl: "http://127.0.0.1:${judgePort}/v1", model: judge, maxRetries: 0, timeoutMs: 2000 } }`,
        '    bootstrapSamples: 100',
        '',
      ].join('\n'),
    );
    const env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' };
    const run = await runHatInProcess(env, 'run', config);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      new RegExp(
        `^note: ${config.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: line 6: stages\\.eval\\.judge\\.model\\.baseUrl: the judge is not reachable: http://127\\.0\\.0\\.1:${judgePort}/v1 does not answer GET /v1/models \\(ECONNREFUSED\\).*; the run goes on and its judge scores will be missing, each with the reason \\(rule scores are unaffected\\)$`,
        'm',
      ),
    );
    expect(run.stderr).not.toContain('BAD_RUN_CONFIG');

    await kit.startWorkers({ queues: ['eval', 'runs'] });
    const status = await watchRun(kit.context, 'judge-down', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    const scores = JSON.parse(
      (await kit.store.getBuffer('runs/judge-down/eval/scores.json')).toString('utf8'),
    ) as EvalScores;
    expect(scores.scores.new.custom!.overall).toMatchObject({ score: 100, items: 1 });
    expect(scores.scores.new.judge!.custom).toEqual({ overall: null, missing: 2 });
    expect(scores.judge!.missing).toBe(2);
    const manifest = await readManifest(kit.store, 'runs/judge-down/eval/manifest.json');
    const results: EvalResult[] = [];
    for (const object of manifest.objects.filter((entry) => entry.kind === 'results'))
      for await (const record of readJsonl<EvalResult>(kit.store, object.key)) results.push(record);
    expect(results.map((result) => result.judge?.error)).toEqual([
      expect.stringMatching(/JUDGE_UNAVAILABLE|MODEL_UNREACHABLE|ECONNREFUSED/),
      expect.stringMatching(/JUDGE_UNAVAILABLE|MODEL_UNREACHABLE|ECONNREFUSED/),
    ]);
    const report = (await kit.store.getBuffer('runs/judge-down/run-report.html')).toString('utf8');
    expect(report).toContain('judge verdicts missing');
  }, 120_000);
});
