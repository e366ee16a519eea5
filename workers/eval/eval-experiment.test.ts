import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildExperiment, experimentHtml, experimentProblems, experimentSchema } from './eval-experiment';
import { EVAL_RESULT_SCHEMA_VERSION, type EvalResult } from './eval-part';

/** One episode result: `kind` picks the column the item counts in. */
function result(
  model: string,
  itemId: string,
  kind: 'live' | 'canonical' | 'seen' | 'held_out' | 'operator',
  score: number,
): EvalResult {
  const harness =
    kind === 'canonical'
      ? { kind: 'canonical' as const }
      : kind === 'live'
        ? undefined
        : {
            kind: 'variant' as const,
            hash: itemId,
            families: [],
            heldOutVariant: kind !== 'seen',
            heldOutOperator: kind === 'operator',
          };
  return {
    schemaVersion: EVAL_RESULT_SCHEMA_VERSION,
    suite: kind === 'live' ? 'live_stream_qa' : 'harness_variant_qa',
    itemId,
    model,
    ...(harness ? { harness } : {}),
    prompt: '',
    response: '',
    status: 'ok',
    score,
    checks: [],
    latencyMs: 0,
    calls: 1,
    usage: { promptTokens: 0, completionTokens: 0 },
  };
}

const experiment = experimentSchema.parse({
  arms: [
    { name: 'A', title: 'fixed-harness SFT', models: ['a1', 'a2'] },
    { name: 'B', title: 'HSA-SFT', models: ['b1', 'b2'] },
  ],
  claims: [
    { text: 'B beats A on held-out variants by 20', difference: ['B', 'A'], column: 'held_out_variants', atLeast: 20 },
    { text: 'B costs at most 3 on canonical', difference: ['B', 'A'], column: 'live_stream_qa', notBelow: -3 },
  ],
});

// A: 80 on its home harness, 10 under held-out variants; B: 78 and 70. Seed 2 of each is 10 points apart from seed 1.
const results: EvalResult[] = [];
for (const [model, live, heldOut] of [
  ['a1', 80, 10],
  ['a2', 90, 20],
  ['b1', 78, 70],
  ['b2', 88, 80],
] as const) {
  for (const item of ['t1', 't2', 't3', 't4']) {
    results.push(result(model, `${item}/live`, 'live', live + (item === 't4' ? 4 : 0)));
    results.push(result(model, `${item}/held`, 'held_out', heldOut));
  }
}

describe('eval experiments: arms over seeds, paired differences, claims', () => {
  it('averages each arm over seeds and items and pairs B − A seed by seed and item by item', async () => {
    const outcome = await buildExperiment(experiment, results, { bootstrapSamples: 400, seed: 's', modelDirs: {} });
    expect(outcome.columns).toEqual(['live_stream_qa', 'held_out_variants']);
    expect(outcome.table.A?.held_out_variants).toMatchObject({ score: 15, perSeed: [10, 20], items: 4 });
    expect(outcome.table.B?.live_stream_qa?.perSeed).toEqual([79, 89]);
    const held = outcome.differences.find((item) => item.column === 'held_out_variants');
    expect(held).toMatchObject({ a: 'B', b: 'A', score: 60, perSeed: [60, 60], seeds: 2, items: 4 });
    // Every (seed, item) difference is 60: the interval cannot be anything else.
    expect([held?.low, held?.high]).toEqual([60, 60]);
    const live = outcome.differences.find((item) => item.column === 'live_stream_qa');
    expect(live?.score).toBeCloseTo(-2);
    // Seeds differ by 10 points in the arm means: the cell's interval reflects seed spread.
    const cell = outcome.table.A?.live_stream_qa;
    expect(cell && cell.high - cell.low).toBeGreaterThan(5);
    expect(outcome.claims.map((claim) => [claim.reproduced, claim.sentence])).toEqual([
      [
        true,
        'B beats A on held-out variants by 20: reproduced: B − A = +60.0 [+60.0, +60.0] on HV-QA: held-out variants (2 seeds × 4 items); needs ≥ +20.0 with the interval above 0.',
      ],
      [true, expect.stringMatching(/^B costs at most 3 on canonical: reproduced: B − A = -2\.0 \[/)],
    ]);
    // The same inputs give the same intervals.
    const again = await buildExperiment(experiment, results, { bootstrapSamples: 400, seed: 's', modelDirs: {} });
    expect(again.table).toEqual(outcome.table);
    const html = experimentHtml(outcome);
    expect(html).toContain('HV-QA: held-out variants');
    expect(html).toContain('Reproduced');
  });

  it("reads each model's loss curve beside its directory and warns when a training stopped short of maxSteps", async () => {
    const root = mkdtempSync(join(tmpdir(), 'hat-experiment-'));
    const modelDirs: Record<string, string> = {};
    for (const [model, steps] of [
      ['a1', 521],
      ['a2', 600],
      ['b1', 600],
      ['b2', 600],
    ] as const) {
      mkdirSync(join(root, model, 'onnx'), { recursive: true });
      modelDirs[model] = join(root, model, 'onnx');
      const lossCurve = Array.from({ length: steps }, (_, index) => ({ step: index + 1, loss: 5 / (index + 1) }));
      writeFileSync(
        join(root, model, 'result.json'),
        JSON.stringify({ steps, lossCurve, config: { maxSteps: 600, maxSeconds: 1200 } }),
      );
    }
    const outcome = await buildExperiment(experiment, results, { bootstrapSamples: 50, seed: 's', modelDirs });
    expect(Object.keys(outcome.curves).sort()).toEqual(['a1', 'a2', 'b1', 'b2']);
    expect(outcome.curves.a1).toHaveLength(521);
    expect(outcome.shortTrainings).toEqual([{ model: 'a1', steps: 521, maxSteps: 600, maxSeconds: 1200 }]);
    const html = experimentHtml(outcome);
    expect(html).toContain('Unequal budgets</b>: a1 trained 521 of its 600 steps (maxSeconds 1200 ran out)');
    expect(html).toContain('aria-label="training loss by step, every arm and seed"');
    // Every training reached its maxSteps: no warning, and no field in scores.json.
    const even = await buildExperiment(experiment, results, { bootstrapSamples: 50, seed: 's', modelDirs: {} });
    expect(even).not.toHaveProperty('shortTrainings');
    expect(experimentHtml(even)).not.toContain('Unequal budgets');
  });

  it('says not reproduced when the difference is too small or its interval reaches 0', async () => {
    const close = results.map((entry) =>
      entry.model.startsWith('b') && entry.itemId.endsWith('/held')
        ? { ...entry, score: (entry.score as number) - 55 + (entry.itemId.startsWith('t1') ? -20 : 0) }
        : entry,
    );
    const outcome = await buildExperiment(experiment, close, { bootstrapSamples: 400, seed: 's', modelDirs: {} });
    expect(outcome.claims[0]).toMatchObject({ reproduced: false });
    expect(outcome.claims[0].sentence).toMatch(/: not reproduced: B − A = \+0\.0 \[/);
  });

  it('refuses arms that name unknown models or differ in their number of seeds', () => {
    const bad = experimentSchema.parse({
      arms: [
        { name: 'A', models: ['a1', 'a2'] },
        { name: 'B', models: ['b1', 'nobody', 'b3'] },
      ],
      claims: [{ text: 't', difference: ['B', 'Z'], column: 'canonical', notBelow: 0 }],
    });
    expect(experimentProblems(bad, ['a1', 'a2', 'b1', 'b3']).map((problem) => problem.message)).toEqual([
      'every arm needs the same number of seeds (paired by position): B has 3, A has 2',
      'no model labelled "nobody" in models; use one of a1, a2, b1, b3',
      'no arm named "Z"; use one of A, B',
    ]);
  });
});
