import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveLatestInputs } from '../queues/runs/latest-inputs';
import { getRunStatus } from '../queues/runs/run-control';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import type { ChatMessage } from '../shared/trajectory/messages';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * The promotion gate in a nightly-shaped run: collect, the trainer handoff, then eval of the new
 * checkpoint against the promoted one (resolved through `latestCheckpoint`) and the base, the
 * gate, and replay only for a promoted checkpoint. The served models answer two custom prompts
 * and one IFEval prompt from a table, so each checkpoint's scores are known in advance.
 */

const noCommas =
  'We sell warm jackets and soft scarves.\nEvery order ships the same day.\nReturns are free for thirty days.';
const commas =
  'We sell jackets, scarves, and hats.\nOrders ship fast, usually the same day.\nReturns are free, no questions asked.';
const lower =
  'thank you so much for your order today.\nwe hope the jacket keeps you warm all winter long.\nplease come back and see us again soon.';
const title =
  'Thank You So Much For Your Order Today.\nWe Hope The Jacket Keeps You Warm All Winter.\nPlease Come Back Soon.';
const itinerary =
  'I will spend the first two days in Tokyo visiting the old temples.\nThen I will take the fast train to Kyoto and walk through the gardens.\nFinally I will rest in Osaka and enjoy the street food there.';

const customPrompts = [
  {
    id: 'no-commas',
    prompt: 'Describe our store in three lines without commas.',
    checks: [{ instruction: 'punctuation:no_comma' }],
  },
  {
    id: 'lowercase',
    prompt: 'Write a short thank-you note in lowercase English.',
    checks: [{ instruction: 'change_case:english_lowercase' }],
  },
];
/** Per served model: its answers to the two custom prompts (custom score 100 / 50). */
const answers: Record<string, [string, string]> = {
  'ckpt-promoted': [noCommas, lower],
  'ckpt-worse': [commas, lower],
  'ckpt-better': [noCommas, lower],
  base: [noCommas, title],
};

describe('promotion gate in a nightly run', () => {
  let kit: QueueTestKit;
  let directory: string;
  let server: OpenAiTestServer;
  let env: Record<string, string>;

  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-gate-'));
    env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' };
    server = await OpenAiTestServer.start({
      models: Object.keys(answers),
      responder: (request) => {
        const messages = request.body.messages as ChatMessage[];
        const table = answers[request.body.model as string];
        const index = customPrompts.findIndex(
          (prompt) => messages.length === 1 && messages[0].content === prompt.prompt,
        );
        if (table && index >= 0) return { content: table[index] };
        // IFEval 1001 (no commas) and replayed sessions: a plain reply without commas.
        return { content: itinerary };
      },
    });
  });
  afterEach(async () => {
    await server.close();
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const hat = (...argv: string[]) => runHatInProcess(env, ...argv);
  const status = (runId: string) => getRunStatus(kit.context, runId);

  async function nightly(runId: string, checkpoint: string): Promise<void> {
    const promptsFile = join(directory, 'custom.jsonl');
    await writeFile(promptsFile, customPrompts.map((prompt) => JSON.stringify(prompt)).join('\n') + '\n');
    const config = join(directory, `${runId}.yaml`);
    await writeFile(
      config,
      [
        `runId: ${runId}`,
        'seed: gate-test',
        'handoff: { after: [collect], before: [eval, replay], timeoutMinutes: 10 }',
        'gate:',
        '  candidate: new',
        '  rules: ["custom >= promoted - 0.5", "ifeval.prompt_strict >= base - 1.0"]',
        '  before: [replay]',
        // The models are the local test server (scripted answers): gate them anyway.
        '  allowSimulated: true',
        'stages:',
        '  collect: { generate: { count: 2, seed: gate }, tasksPerPart: 2 }',
        '  eval:',
        '    models:',
        '      - { label: new, model: { adapter: openai, baseUrl: "${checkpoint.endpoint}", model: "${checkpoint.model}", maxRetries: 0 } }',
        `      - { label: promoted, model: { adapter: openai, baseUrl: { latestCheckpoint: "${kit.artifactsRoot}", field: endpoint }, model: { latestCheckpoint: "${kit.artifactsRoot}", field: model }, maxRetries: 0 } }`,
        `      - { label: base, model: { adapter: openai, baseUrl: "${server.baseUrl}", model: base, maxRetries: 0 } }`,
        `    suites: { custom: { prompts: "${promptsFile}" }, ifeval: { keys: [1001] } }`,
        '    bootstrapSamples: 100',
        '  replay:',
        '    inputs: ["${stages.collect.manifestUri}"]',
        '    target: { adapter: openai, baseUrl: "${checkpoint.endpoint}", model: "${checkpoint.model}", retryInitialDelayMs: 10 }',
        '',
      ].join('\n'),
    );
    const run = await hat('run', config);
    expect(run.code).toBe(0);
    // What the promoted label resolved to is said at once (and kept in the run manifest).
    expect(run.stderr).toMatch(
      /^latest: stages\.eval\.models\[1\]\.model\.baseUrl -> ckpt-promoted@\S+\nlatest: stages\.eval\.models\[1\]\.model\.model -> ckpt-promoted@\S+\n$/,
    );
    await waitFor(async () =>
      (await status(runId)).handoffs?.[0]?.state === 'waiting-for-checkpoint' ? true : undefined,
    );
    const registered = await hat('checkpoint', 'register', runId, '--endpoint', server.baseUrl, '--model', checkpoint);
    expect([registered.code, registered.stderr]).toEqual([0, '']);
    await waitFor(async () => {
      const current = await status(runId);
      return current.state === 'completed' || current.state === 'failed' ? current : undefined;
    }, 60_000);
  }

  const pointer = async () =>
    JSON.parse((await kit.store.getBuffer('checkpoints/promoted.json')).toString('utf8')) as {
      model: string;
      runId?: string;
      promotedBy: string;
    };

  it('holds a checkpoint that scores lower (pointer unmoved, replay not run, report says why), then promotes a better one', async () => {
    await kit.startWorkers({ queues: ['collect', 'eval', 'gate', 'replay', 'runs'] });
    const seeded = await hat(
      'checkpoint',
      'promote',
      '--endpoint',
      server.baseUrl,
      '--model',
      'ckpt-promoted',
      '--note',
      'yesterday',
    );
    expect([seeded.code, seeded.stderr]).toEqual([0, '']);

    await nightly('night-1', 'ckpt-worse');
    const first = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/night-1/run-manifest.json')).toString('utf8')),
    );
    expect(first.status).toBe('completed');
    expect(first.gate).toMatchObject({ decision: 'hold', candidate: 'new', promoted: false, skipped: ['replay'] });
    expect(first.gate!.reasons).toEqual(['custom 50.00 < promoted 100.00 - 0.5 = 99.50']);
    // A hold is a decision, not a failure: the gate is held (with its reasons), replay not run.
    expect(first.stages.map((stage) => [stage.name, stage.status])).toEqual([
      ['collect', 'completed'],
      ['eval', 'completed'],
      ['gate', 'held'],
      ['replay', 'not-run'],
    ]);
    expect(first.stages.find((stage) => stage.name === 'gate')!).toMatchObject({
      note: 'held new: custom 50.00 < promoted 100.00 - 0.5 = 99.50',
    });
    expect(first.stages.find((stage) => stage.name === 'gate')!.error).toBeUndefined();
    expect(first.stages.find((stage) => stage.name === 'replay')!.error).toBe(
      'held by the gate: custom 50.00 < promoted 100.00 - 0.5 = 99.50',
    );
    expect(
      server.requests.some(
        (request) => request.body?.model === 'ckpt-worse' && (request.body.messages as ChatMessage[]).length > 1,
      ),
    ).toBe(false);
    expect(await pointer()).toMatchObject({ model: 'ckpt-promoted', promotedBy: 'cli' });
    const report = (await kit.store.getBuffer('runs/night-1/run-report.html')).toString('utf8');
    expect(report).toContain('held new</b>; the promoted checkpoint did not move');
    expect(report).toContain('custom 50.00 &lt; promoted 100.00 - 0.5 = 99.50');
    expect(report).toContain('leaderboard: new');
    expect(report).toContain('>held</td>');
    expect(report).toContain('1 held');
    const reportJson = JSON.parse((await kit.store.getBuffer('runs/night-1/run-report.json')).toString('utf8')) as {
      totals: { completed: number; held: number; failed: number };
    };
    expect(reportJson.totals).toMatchObject({ completed: 2, held: 1, failed: 0 });
    // The live jobs (what `runs show` and the queue dashboard read): no failed job, the gate held.
    const shown = await hat('runs', 'show', 'night-1');
    expect(shown.stdout).toContain('run night-1: completed');
    expect(shown.stdout).toMatch(
      / {2}gate: held, single job[^\n]*\n {4}held new: custom 50\.00 < promoted 100\.00 - 0\.5 = 99\.50\n/,
    );
    expect(shown.stdout).toMatch(
      / {2}replay: not-run, single job\n {4}held by the gate: custom 50\.00 < promoted 100\.00 - 0\.5 = 99\.50/,
    );
    expect(shown.stdout).not.toMatch(/failed|GATE_HOLD/);
    const live = await status('night-1');
    expect(live.stages.map((stage) => [stage.name, stage.state])).toEqual([
      ['collect', 'completed'],
      ['eval', 'completed'],
      ['gate', 'held'],
      ['replay', 'not-run'],
    ]);
    expect(await kit.context.queue('gate').getFailedCount()).toBe(0);
    expect(await kit.context.queue('replay').getFailedCount()).toBe(0);

    await nightly('night-2', 'ckpt-better');
    const second = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer('runs/night-2/run-manifest.json')).toString('utf8')),
    );
    expect(second.status).toBe('completed');
    expect(second.gate).toMatchObject({ decision: 'promote', promoted: true, skipped: [] });
    expect(second.stages.map((stage) => [stage.name, stage.status])).toEqual([
      ['collect', 'completed'],
      ['eval', 'completed'],
      ['gate', 'completed'],
      ['replay', 'completed'],
    ]);
    expect(await pointer()).toMatchObject({ model: 'ckpt-better', runId: 'night-2', promotedBy: 'gate' });
    // The next run's `latestCheckpoint` resolves to the promoted checkpoint.
    const next = await resolveLatestInputs(
      { stages: { eval: { model: { latestCheckpoint: kit.artifactsRoot, field: 'model' } } } },
      { openObject: (uri) => openArtifactObject(uri), now: new Date() },
    );
    expect(next.resolved.map((input) => input.resolved)).toEqual(['ckpt-better']);
    const listed = await hat('checkpoint', 'list', '--json');
    const history = JSON.parse(listed.stdout) as {
      promoted: { model: string };
      history: Array<{ model: string; promotedBy: string }>;
    };
    expect(history.promoted.model).toBe('ckpt-better');
    expect(history.history.map((entry) => [entry.model, entry.promotedBy])).toEqual([
      ['ckpt-promoted', 'cli'],
      ['ckpt-better', 'gate'],
    ]);
    // An operator can override the gate: promote the held candidate of night-1 by hand.
    const override = await hat('checkpoint', 'promote', '--run', 'night-1');
    expect(override.code).toBe(0);
    expect(await pointer()).toMatchObject({ model: 'ckpt-worse', promotedBy: 'cli' });
  }, 180_000);
});
