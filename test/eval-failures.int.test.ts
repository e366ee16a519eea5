import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkIfevalResponse, loadIfevalItems } from '../shared/eval/ifeval';
import type { ChatMessage } from '../shared/trajectory/messages';
import { evalOutputSchema } from '../workers/eval/eval-contract';
import type { EvalScores } from '../workers/eval/eval-scores';
import { summarizeEval } from '../workers/eval/eval-summary';
import type { GateOutput } from '../workers/gate/gate-contract';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';

/**
 * Failures count (#33): with HTTP 500 on 2 of 20 IFEval prompts, the failed prompts' instructions
 * used to leave the denominator, so instruction-level strict rose and the gate promoted the model.
 * Now each failed item scores 0 on every check it carries, is listed, and the gate holds.
 */

const reply =
  'I will spend the first two days in Tokyo visiting the old temples.\nThen I will take the fast train to Kyoto and walk through the gardens.\nFinally I will rest in Osaka and enjoy the street food there.';

describe('eval: failed items count', () => {
  let server: OpenAiTestServer;
  let directory: string;
  afterEach(async () => {
    await server?.close();
    await rm(directory, { recursive: true, force: true });
  });

  it('HTTP 500 on 2 of 20 IFEval prompts: instruction strict goes down, the failures are listed, the gate holds', async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-eval-failures-'));
    const passes = (strict: boolean[]) => strict.filter(Boolean).length;
    const outcomes = loadIfevalItems().map((item) => ({ item, strict: checkIfevalResponse(item, reply).strict }));
    // Two prompts the reply follows in part (so failing them loses instructions), and 18 it follows best.
    const share = (entry: (typeof outcomes)[number]) => passes(entry.strict) / entry.strict.length;
    const faulted = outcomes.filter((entry) => share(entry) > 0 && share(entry) < 1).slice(0, 2);
    const others = outcomes.filter((entry) => !faulted.includes(entry));
    others.sort((left, right) => share(right) - share(left) || left.item.key - right.item.key);
    const chosen = [...others.slice(0, 18), ...faulted];
    const total = chosen.reduce((sum, entry) => sum + entry.strict.length, 0);
    const followed = chosen.reduce((sum, entry) => sum + passes(entry.strict), 0);
    const lost = faulted.reduce((sum, entry) => sum + passes(entry.strict), 0);
    const dropped = faulted.reduce((sum, entry) => sum + entry.strict.length, 0);
    const answered = (followed / total) * 100;
    // What the stage reported before: the failed prompts' instructions left the denominator, and the score rose.
    expect(((followed - lost) / (total - dropped)) * 100).toBeGreaterThan(answered);

    const faultedPrompts = new Set(faulted.map((entry) => entry.item.prompt));
    server = await OpenAiTestServer.start({
      models: ['new', 'promoted'],
      responder: (request) => {
        const prompt = (request.body.messages as ChatMessage[])[0].content as string;
        if (request.body.model === 'new' && faultedPrompts.has(prompt))
          return { fault: { kind: 'status', status: 500, message: 'engine crashed' } };
        return { content: reply };
      },
    });
    const model = (name: string) => ({ adapter: 'openai', baseUrl: server.baseUrl, model: name, maxRetries: 0 });
    const configFile = join(directory, 'eval.json');
    await writeFile(
      configFile,
      JSON.stringify({
        models: [
          { label: 'new', model: model('new') },
          { label: 'promoted', model: model('promoted') },
        ],
        suites: { ifeval: { keys: chosen.map((entry) => entry.item.key) } },
        bootstrapSamples: 100,
      }),
    );
    const out = join(directory, 'eval');
    const env = { ...process.env, HAT_LOG_LEVEL: 'silent' };
    const evaluated = await runHatInProcess(
      env,
      'stage',
      'eval',
      '--config',
      configFile,
      '--out',
      pathToFileURL(out).href,
      '--seed',
      'failures',
      '--json',
    );
    expect(evaluated.code).toBe(0);
    const scores = JSON.parse(await readFile(join(out, 'scores.json'), 'utf8')) as EvalScores;
    // Down, not up: the failed prompts' instructions count as not followed.
    expect(scores.scores.promoted.ifeval!.instructionStrict).toBeCloseTo(answered, 10);
    expect(scores.scores.new.ifeval!.instructionStrict).toBeCloseTo(((followed - lost) / total) * 100, 10);
    expect(scores.scores.new.ifeval!.instructionStrict).toBeLessThan(answered);
    expect(scores.scores.new.ifeval!.count).toBe(20);
    // Listed, with the error, and the error rate per model.
    expect(scores.scores.new).toMatchObject({ modelErrors: 2, evaluated: 20, errorRate: 0.1 });
    expect(scores.scores.promoted).toMatchObject({ modelErrors: 0, evaluated: 20, errorRate: 0 });
    expect(scores.scores.new.failures.map((failure) => failure.itemId).sort()).toEqual(
      faulted.map((entry) => `ifeval-${entry.item.key}`).sort(),
    );
    expect(scores.scores.new.failures[0]).toMatchObject({ suite: 'ifeval', status: 'model_error' });
    expect(scores.scores.new.failures[0].error).toMatch(/500/);
    // The test server says what it is in /v1/models: neither model is a real one.
    expect(scores.models.map((entry) => [entry.label, entry.simulated, entry.simulatedReason])).toEqual([
      ['new', true, 'LOCAL TEST SERVER: scripted answers, not a model'],
      ['promoted', true, 'LOCAL TEST SERVER: scripted answers, not a model'],
    ]);
    const html = await readFile(join(out, 'report.html'), 'utf8');
    expect(html).toContain('new: 2 of 20 items failed (error rate 10.0%)');
    expect(html).toContain('each scores 0 on every check it carries): new 10.0% · promoted 0.0%</p>');
    expect(html).toContain('<h2 id="failed-items">Failed items</h2>');
    for (const entry of faulted) expect(html).toContain(`<td>ifeval-${entry.item.key}</td>`);
    // The run report's eval figures (what summarize gives a run): each model's error rate, the failed items.
    const figures = summarizeEval(evalOutputSchema.parse(JSON.parse(evaluated.stdout))).figures;
    expect(figures).toContainEqual(
      expect.objectContaining({ label: 'failed items: new', value: '2 of 20 (error rate 10.0%)', tone: 'warn' }),
    );
    expect(figures.find((figure) => figure.label.startsWith('leaderboard: promoted'))!.value).toMatch(
      / · error rate 0\.0%$/,
    );

    // The gate: a rule the candidate passes, yet it holds on the error rate (and on being a test server).
    const gate = async (name: string, extra: Record<string, unknown>) => {
      const file = join(directory, `${name}.json`);
      await writeFile(
        file,
        JSON.stringify({
          scores: pathToFileURL(join(out, 'manifest.json')).href,
          candidate: 'new',
          rules: ['ifeval.instruction_strict >= promoted - 20'],
          pointerRoot: pathToFileURL(join(directory, 'root')).href,
          ...extra,
        }),
      );
      const result = await runHatInProcess(
        env,
        'stage',
        'gate',
        '--config',
        file,
        '--out',
        pathToFileURL(join(directory, name)).href,
        '--json',
      );
      expect(result.code).toBe(0);
      return JSON.parse(result.stdout) as GateOutput;
    };
    const held = await gate('gate', {});
    expect(held).toMatchObject({ decision: 'hold', promoted: false });
    expect(held.reasons).toEqual([
      'error rate of new 10.00% (2 of 20 items failed or timed out) > maxErrorRate 1.00%',
      'new is not a real model (LOCAL TEST SERVER: scripted answers, not a model); set allowSimulated: true in the gate config to gate it anyway',
    ]);
    const allowed = await gate('gate-allowed', { allowSimulated: true, maxErrorRate: 0.1 });
    expect(allowed).toMatchObject({ decision: 'promote', promoted: true });
  }, 120_000);

  it('every item of the model failed: the stage fails (exit 1, EVAL_MODEL_UNAVAILABLE, retried later) instead of printing done, and writes no manifest', async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-eval-no-answers-'));
    server = await OpenAiTestServer.start({
      models: ['down'],
      responder: () => ({ fault: { kind: 'status', status: 503, message: 'overloaded' } }),
    });
    const configFile = join(directory, 'eval.json');
    await writeFile(
      configFile,
      JSON.stringify({
        models: [
          { label: 'down', model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'down', maxRetries: 0 } },
        ],
        suites: { ifeval: { size: 3 } },
        bootstrapSamples: 100,
      }),
    );
    const out = join(directory, 'eval');
    const result = await runHatInProcess(
      { ...process.env, HAT_LOG_LEVEL: 'silent' },
      'stage',
      'eval',
      '--config',
      configFile,
      '--out',
      pathToFileURL(out).href,
    );
    expect([result.code, result.stderr]).toEqual([
      1,
      expect.stringMatching(/\[EVAL_MODEL_UNAVAILABLE\] 3 of 3 items of model down on ifeval failed/),
    ]);
    await expect(readFile(join(out, 'manifest.json'), 'utf8')).rejects.toThrow(/ENOENT/);
  }, 120_000);
});
