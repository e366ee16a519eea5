import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadIfevalItems } from '../shared/eval/ifeval';
import type { ScoresComparison } from '../shared/eval/item-outcomes';
import type { ChatMessage } from '../shared/trajectory/messages';
import type { EvalScores } from '../workers/eval/eval-scores';
import { summarizeGate, type GateOutput } from '../workers/gate/gate-contract';
import { runHatInProcess } from './support/hat-in-process';
import { OpenAiTestServer } from './support/openai-test-server';

/**
 * Night to night (#33): two eval runs of one model label, paired item by item. Night 1 follows
 * IFEval 1001 (no commas) and 1051 (lowercase) and breaks 1566 (capitals); night 2 keeps 1001,
 * breaks 1051 and follows 1566. `hat eval compare` lists 1051 as lost and 1566 as gained; the
 * gate of night 2 compares its candidate with the results night 1's checkpoint was promoted on.
 */

const text = {
  noCommas:
    'I will spend the first two days in Tokyo visiting the old temples.\nThen I will take the fast train to Kyoto and walk through the gardens.\nFinally I will rest in Osaka and enjoy the street food there.',
  lower:
    'dear sam,\nplease remember to go and vote next tuesday because every single vote matters in our town.\nsee you at the polling station in the morning.',
  capitals:
    'I REGRET THE SUMMER WE LOST AND THE WORDS I NEVER SAID.\nTHIS SONG IS ABOUT LEARNING FROM THOSE REGRETS AND MOVING ON.\nTHE CHORUS REPEATS THE PROMISE TO DO BETTER NEXT TIME.',
};
/** Per served model, per IFEval key: the reply. */
const replies: Record<string, Record<number, string>> = {
  night1: { 1001: text.noCommas, 1051: text.lower, 1566: text.lower },
  night2: { 1001: text.noCommas, 1051: text.capitals, 1566: text.capitals },
};
const keys = [1001, 1051, 1566];

describe('eval: night to night', () => {
  let server: OpenAiTestServer;
  let directory: string;
  const env = { ...process.env, HAT_LOG_LEVEL: 'silent' };
  afterEach(async () => {
    await server?.close();
    await rm(directory, { recursive: true, force: true });
  });

  it('`hat eval compare` pairs items across two scores.json, and the gate compares with the promoted results', async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-eval-compare-'));
    const prompts = new Map(
      loadIfevalItems()
        .filter((item) => keys.includes(item.key))
        .map((item) => [item.prompt, item.key]),
    );
    server = await OpenAiTestServer.start({
      models: Object.keys(replies),
      responder: (request) => {
        const prompt = (request.body.messages as ChatMessage[])[0].content as string;
        const key = prompts.get(prompt);
        return { content: (key !== undefined && replies[request.body.model as string][key]) || text.noCommas };
      },
    });
    const night = async (name: string) => {
      const configFile = join(directory, `${name}.json`);
      await writeFile(
        configFile,
        JSON.stringify({
          models: [{ label: 'new', model: { adapter: 'openai', baseUrl: server.baseUrl, model: name, maxRetries: 0 } }],
          suites: { ifeval: { keys } },
          bootstrapSamples: 200,
        }),
      );
      const out = join(directory, name);
      const result = await runHatInProcess(
        env,
        'stage',
        'eval',
        '--config',
        configFile,
        '--out',
        pathToFileURL(out).href,
        '--run-id',
        name,
      );
      if (result.code !== 0) throw new Error(`hat stage eval exited ${result.code}: ${result.stderr}`);
      return join(out, 'scores.json');
    };
    const a = await night('night1');
    const b = await night('night2');
    const stored = JSON.parse(await readFile(a, 'utf8')) as EvalScores;
    // Each item keeps a stable id and a hash of its prompt: what pairing matches on.
    expect(stored.scores.new.items.ifeval.map((item) => [item.id, item.score])).toEqual([
      ['ifeval-1001', 100],
      ['ifeval-1051', 100],
      ['ifeval-1566', 0],
    ]);
    expect(stored.scores.new.items.ifeval[0].prompt).toMatch(/^[0-9a-f]{16}$/);

    const compared = await runHatInProcess(env, 'eval', 'compare', a, b);
    expect([compared.code, compared.stderr]).toEqual([0, '']);
    expect(compared.stdout).toContain(`A: ${a} (run night1, model new)`);
    expect(compared.stdout).toMatch(/^ifeval: \+0\.00 \[-?\d+\.\d\d, \+?\d+\.\d\d\] \(3 items\)$/m);
    expect(compared.stdout).toContain('passed in A, failed in B: 1\n  ifeval ifeval-1051: 100.0 -> 0.0');
    expect(compared.stdout).toContain('failed in A, passed in B: 1\n  ifeval ifeval-1566: 0.0 -> 100.0');
    const json = await runHatInProcess(env, 'eval', 'compare', a, b, '--json');
    const comparison = JSON.parse(json.stdout) as ScoresComparison;
    expect(comparison.suites).toEqual([
      { suite: 'ifeval', difference: expect.objectContaining({ score: 0, items: 3 }) },
    ]);
    expect(comparison.lost.map((item) => item.id)).toEqual(['ifeval-1051']);
    expect(comparison.gained.map((item) => item.id)).toEqual(['ifeval-1566']);

    // A file that is not a scores.json: exit 2, the code and the file named.
    const notScores = join(directory, 'not-scores.json');
    await writeFile(notScores, JSON.stringify({ hello: 'world' }));
    const refused = await runHatInProcess(env, 'eval', 'compare', a, notScores);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`[EVAL_BAD_SCORES] ${notScores} is not an eval scores.json`);
    const missing = await runHatInProcess(env, 'eval', 'compare', a, join(directory, 'nope.json'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('[EVAL_SCORES_NOT_FOUND]');

    // The gate promotes night 1, then judges night 2 with night 1's stored results beside it.
    const gate = async (name: string, scores: string) => {
      const file = join(directory, `gate-${name}.json`);
      await writeFile(
        file,
        JSON.stringify({
          scores: pathToFileURL(scores).href,
          candidate: 'new',
          rules: ['ifeval >= 50'],
          pointerRoot: pathToFileURL(join(directory, 'root')).href,
          allowSimulated: true,
        }),
      );
      const result = await runHatInProcess(
        env,
        'stage',
        'gate',
        '--config',
        file,
        '--out',
        pathToFileURL(join(directory, `gate-${name}`)).href,
        '--run-id',
        name,
        '--json',
      );
      expect(result.code).toBe(0);
      return JSON.parse(result.stdout) as GateOutput;
    };
    expect((await gate('night1', a)).nightToNight).toBeUndefined();
    const second = await gate('night2', b);
    expect(second.nightToNight).toMatchObject({
      promotedScoresUri: pathToFileURL(a).href,
      promotedRunId: 'night1',
      promotedLabel: 'new',
      suites: [{ suite: 'ifeval', difference: { score: 0, items: 3 } }],
      lost: 1,
      gained: 1,
    });
    const figure = summarizeGate(second).figures.find((entry) => entry.label === 'new vs promoted (stored results)');
    expect(figure).toMatchObject({ value: expect.stringMatching(/^ifeval \+0\.0 \[/) });
    expect(figure!.detail).toContain('1 items passed then and fail now, 1 the reverse');
  }, 120_000);
});
