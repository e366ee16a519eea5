import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { readManifest } from '../../shared/artifacts/manifest';
import { BadInputError, exitCodeOf } from '../../shared/errors';
import { silentLogger } from '../../shared/log/logger';
import { augmentStage } from '../augment/processor';
import { collectStage } from '../collect/processor';
import type { EvalOutput } from './eval-contract';
import type { EvalResult } from './eval-part';
import type { EvalScores } from './eval-scores';
import { evalStage } from './processor';

/** The compact harness of the HAT-effect experiment (examples/hat-effect.yaml). */
const harness = join(__dirname, '../../examples/harness/compact-host');
const categories = ['price', 'spec'] as const;
const weights = Object.fromEntries(
  ['price', 'spec', 'stock_size', 'coupon_math', 'shipping_after_sales', 'comparison', 'chit_chat']
    .concat(['compliance_trap', 'multi_question', 'multi_turn', 'out_of_catalog'])
    .map((category) => [category, (categories as readonly string[]).includes(category) ? 1 : 0]),
);

const directories: string[] = [];
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

/** collect + augment under the compact harness into one store; augment applies `families`. */
async function trainingData(families: Record<string, number>) {
  const directory = await mkdtemp(join(tmpdir(), 'hat-held-out-'));
  directories.push(directory);
  const store = new FileArtifactStore(directory);
  const options = {
    store,
    openObject: (uri: string) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'held-out',
  };
  const collect = (
    await runStageLocally(
      collectStage,
      { generate: { count: 8, seed: 'held-out', categoryWeights: weights }, harness },
      { ...options, outputPrefix: 'collect' },
    )
  ).output as { manifestUri: string };
  const augment = (
    await runStageLocally(
      augmentStage,
      { inputs: [collect.manifestUri], harness, families, variantPool: 4, variantsPerTrajectory: 2 },
      { ...options, outputPrefix: 'augment' },
    )
  ).output as { manifestUri: string };
  const evalConfig = (heldOutFamilies: string[]) => ({
    harness,
    models: [{ label: 'expert', model: { adapter: 'scripted', policy: 'expert' } }],
    suites: {
      harness_variant_qa: {
        size: 4,
        categories,
        variantsPerTask: 1,
        seenVariantsPerTask: 1,
        families,
        heldOutFamilies,
      },
    },
    trainingManifests: [augment.manifestUri],
  });
  return { store, options, augment, evalConfig };
}

describe('harness_variant_qa: seen variants, held-out variants and held-out operators, proven against training', () => {
  it('plays seen variants from the augment output, new draws as held-out, and the held-out family apart', async () => {
    const families = { tool_schemas: 0.8, hooks: 0.6, prompt_structure: 0 };
    const { store, options, augment, evalConfig } = await trainingData(families);
    const result = await runStageLocally(evalStage, evalConfig(['prompt_structure']), {
      ...options,
      outputPrefix: 'eval',
    });
    expect((result.output as EvalOutput).items).toBe(16);
    const results: EvalResult[] = [];
    for (const object of (await readManifest(store, 'eval/manifest.json')).objects.filter(
      (entry) => entry.kind === 'results',
    ))
      for await (const record of readJsonl<EvalResult>(store, object.key)) results.push(record);
    const stored = (await readManifest(store, store.keyOf(augment.manifestUri))).objects
      .map((object) => /variants\/([0-9a-f]+)\//.exec(object.key)?.[1])
      .filter((hash): hash is string => hash !== undefined);
    const seen = results.filter((entry) => entry.harness?.kind === 'variant' && !entry.harness.heldOutVariant);
    const heldOut = results.filter((entry) => entry.harness?.heldOutVariant && !entry.harness.heldOutOperator);
    const operators = results.filter((entry) => entry.harness?.heldOutOperator);
    expect([seen.length, heldOut.length, operators.length]).toEqual([4, 4, 4]);
    // Seen variants are the augment stage's own; held-out ones are not among them.
    for (const entry of seen) expect(stored).toContain(entry.harness?.hash);
    for (const entry of [...heldOut, ...operators]) expect(stored).not.toContain(entry.harness?.hash);
    for (const entry of operators) expect(entry.harness?.families).toEqual(['prompt_structure']);
    // The expert plays every harness: a renamed tool or a reordered prompt does not confuse it.
    expect(results.every((entry) => entry.score === 100)).toBe(true);
    const scores = JSON.parse((await store.getBuffer('eval/scores.json')).toString('utf8')) as EvalScores;
    expect(scores.scores.expert?.metrics['harness_variant_qa.held_out_operators']).toBe(100);
  });

  it('refuses (exit 2) a held-out family that training variants applied, naming the family and count', async () => {
    const { options, evalConfig } = await trainingData({ tool_schemas: 0.8, hooks: 1 });
    const refused = await runStageLocally(evalStage, evalConfig(['hooks']), { ...options, outputPrefix: 'eval' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(BadInputError);
    expect(exitCodeOf(refused)).toBe(2);
    expect((refused as Error).message).toMatch(
      /^\[EVAL_HELD_OUT_TRAINED\] suites\.harness_variant_qa\.heldOutFamilies: training used hooks in \d+ variant\(s\)/,
    );
  });
});

describe('training manifests are read strictly', () => {
  it('refuses a training JSONL with a byte that is not UTF-8 ([BAD_ENCODING], file and line), instead of comparing U+FFFD', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'hat-bad-training-'));
    directories.push(directory);
    const store = new FileArtifactStore(directory);
    await store.put(
      'train.jsonl',
      Buffer.concat([Buffer.from('{"prompt":"ok"}\n{"prompt":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]),
    );
    const refused = await runStageLocally(
      evalStage,
      {
        models: [{ label: 'expert', model: { adapter: 'scripted', policy: 'expert' } }],
        suites: { live_stream_qa: { size: 1 } },
        trainingManifests: [store.uriOf('train.jsonl')],
      },
      {
        store,
        openObject: (uri: string) => openArtifactObject(uri),
        logger: silentLogger(),
        seed: 's',
        outputPrefix: 'eval',
      },
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(exitCodeOf(refused)).toBe(2);
    expect((refused as Error).message).toMatch(/^\[BAD_ENCODING\] .*train\.jsonl.*line 2/);
  });
});
