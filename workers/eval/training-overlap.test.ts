import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { planRun, readConfigFile } from '../../queues/runs/run-config';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { writeManifest } from '../../shared/artifacts/manifest';
import { loadIfevalItems } from '../../shared/eval/ifeval';
import { exitCodeOf } from '../../shared/errors';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { silentLogger } from '../../shared/log/logger';
import { OpenAiTestServer } from '../../shared/models/testing/openai-test-server';
import { registerCatalogStages } from '../stage-catalog';
import { NgramIndex } from './contamination';
import { evalInputSchema, type EvalInputConfig } from './eval-contract';
import { buildSuiteItems } from './eval-items';
import type { EvalScores } from './eval-scores';
import { evalStage } from './processor';

/**
 * Issue #33, items 2 and 4: eval reads what every training stage (shard and the collect/augment
 * outputs behind it, distill, rl) trained on; a held-out operator family or variant that one of
 * them used is refused naming the stage, and eval prompts are found in training records by
 * 13-gram overlap (behind a prefix, as content parts, in tool results), naming the record.
 */

const directories: string[] = [];
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

async function scratch(): Promise<FileArtifactStore> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-eval-overlap-'));
  directories.push(directory);
  return new FileArtifactStore(directory);
}

/** A stage output as its stage would publish it: one JSONL part and `manifest.json` listing it. */
async function stageOutput(
  store: FileArtifactStore,
  prefix: string,
  stage: string,
  records: unknown[],
  stats: Record<string, unknown> = {},
): Promise<string> {
  const written = await writeJsonl(store, `${prefix}/part-00000.jsonl.gz`, records);
  const { info } = await writeManifest(store, `${prefix}/manifest.json`, {
    stage,
    runId: 'train',
    objects: [
      {
        key: written.key,
        uri: written.uri,
        sha256: written.sha256,
        bytes: written.bytes,
        records: written.records,
        schemaVersion: 1,
        format: 'jsonl.gz',
      },
    ],
    lineage: { inputs: [], configHash: stage },
    stats,
  });
  return info.uri;
}

async function runEval(store: FileArtifactStore, config: EvalInputConfig) {
  return runStageLocally(evalStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'overlap',
    outputPrefix: 'eval',
    concurrency: 1,
  });
}

async function refusal(store: FileArtifactStore, config: EvalInputConfig): Promise<Error> {
  const error = await runEval(store, config).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(Error);
  expect(exitCodeOf(error)).toBe(2);
  return error as Error;
}

async function scoresOf(store: FileArtifactStore): Promise<EvalScores> {
  return JSON.parse((await store.getBuffer('eval/scores.json')).toString('utf8')) as EvalScores;
}

const expert = { label: 'expert', model: { adapter: 'scripted', policy: 'expert' } } as const;
const variantSuite = {
  size: 1,
  categories: ['price' as const],
  variantsPerTask: 1,
  heldOutFamilies: ['hooks' as const],
};

/** An rl episode record (rl's flat columns: messages as a JSON string, variant_hash, harness_families). */
function rlEpisode(index: number, variantHash: string | null, families: string[]) {
  return {
    group_index: index,
    index,
    task_id: `task-${index}`,
    messages: JSON.stringify([{ role: 'user', content: 'how much is the blue scarf?' }]),
    variant_hash: variantHash,
    harness_families: families,
    canonical_harness: variantHash === null,
  };
}

describe('held-out operators proven against every training stage', () => {
  it('refuses (exit 2) hooks held out by the shard but applied by rl, naming the stage, family and count', async () => {
    const store = await scratch();
    const shard = await stageOutput(store, 'train/sft_data', 'shard', [{ messages: [] }], {
      settings: { heldOut: { families: ['hooks'] } },
    });
    const rl = await stageOutput(store, 'train/rl', 'rl', [
      rlEpisode(0, 'a'.repeat(64), ['hooks', 'tool_schemas']),
      rlEpisode(1, 'b'.repeat(64), ['hooks']),
      rlEpisode(2, 'c'.repeat(64), ['skill_ids']),
      rlEpisode(3, null, []),
    ]);
    const error = await refusal(store, {
      models: [expert],
      suites: { harness_variant_qa: variantSuite },
      trainingManifests: [shard, rl],
    });
    expect(error.message).toMatch(
      /^\[EVAL_HELD_OUT_TRAINED\] suites\.harness_variant_qa\.heldOutFamilies: training used hooks in 2 variant\(s\) of stage rl /,
    );
    // Nothing half-written: the refusal comes before any output.
    expect(await store.head('eval/plan.json')).toBeUndefined();
  });

  it('with allowOverlap evaluates anyway and flags the held-out operators figure in scores.json and the report', async () => {
    const store = await scratch();
    const rl = await stageOutput(store, 'train/rl', 'rl', [rlEpisode(0, 'a'.repeat(64), ['hooks'])]);
    await runEval(store, {
      models: [expert],
      suites: { harness_variant_qa: variantSuite },
      trainingManifests: [rl],
      allowOverlap: true,
      bootstrapSamples: 100,
    });
    const scores = await scoresOf(store);
    expect(scores.contamination.heldOutTrained?.families).toEqual([{ stage: 'rl', family: 'hooks', variants: 1 }]);
    const report = (await store.getBuffer('eval/report.html')).toString('utf8');
    expect(report).toContain('HELD-OUT OPERATORS NOT HELD OUT');
    expect(report).toContain('Stage rl applied hooks in 1 variant(s).');
  }, 60_000);

  it('refuses a held-out operator variant whose hash a training stage played, naming the item and stage', async () => {
    const store = await scratch();
    const input = evalInputSchema.parse({ models: [expert], suites: { harness_variant_qa: variantSuite } });
    const [suite] = await buildSuiteItems(
      input,
      await loadHarness(sampleHarnessDirectory()),
      { variantHashes: new Set(), variantDirs: new Map(), variantFamilies: new Map() },
      (uri) => openArtifactObject(uri),
    );
    const operator = suite!.items.find(
      (item) => item.suite === 'harness_variant_qa' && item.harness.kind === 'variant' && item.harness.heldOutOperator,
    );
    if (operator?.suite !== 'harness_variant_qa' || operator.harness.kind !== 'variant')
      throw new Error('no held-out operator item');
    // The record names no families (an older rl output): the hash alone gives it away.
    const rl = await stageOutput(store, 'train/rl', 'rl', [rlEpisode(0, operator.harness.hash, [])]);
    const error = await refusal(store, {
      models: [expert],
      suites: { harness_variant_qa: variantSuite },
      trainingManifests: [rl],
    });
    expect(error.message).toContain(
      '[EVAL_HELD_OUT_TRAINED] suites.harness_variant_qa: 1 held-out operator variant(s)',
    );
    expect(error.message).toContain(`${operator.id} (variant ${operator.harness.hash.slice(0, 12)}, stage rl)`);
  });
});

describe('examples/nightly.yaml is consistent with its held-out claims', () => {
  beforeAll(() => registerCatalogStages());

  it('eval names every training stage (shard, both distill rounds, rl) and no training stage applies a held-out family', async () => {
    const source = await readConfigFile(join(__dirname, '..', '..', 'examples', 'nightly.yaml'));
    const plan = planRun(source.value, {
      env: { HAT_ARTIFACTS: 's3://hat/runs-root' },
      now: new Date('2025-01-30T18:00:00Z'),
      runId: 'nightly-20250130T180000Z',
      file: source.file,
      locator: source.locator,
    });
    const stage = (name: string) => plan.stages.find((entry) => entry.name === name);
    const evalConfig = (stage('eval')?.template ?? stage('eval')?.input) as {
      trainingManifests: string[];
      suites: { harness_variant_qa: { heldOutFamilies: string[] } };
    };
    const named = evalConfig.trainingManifests.join(' ');
    const trainingStages = plan.stages.filter((entry) => ['shard', 'distill', 'rl'].includes(entry.kind));
    expect(trainingStages.map((entry) => entry.name)).toEqual(['sft_data', 'opd-round-1', 'opd-round-2', 'rl']);
    for (const entry of trainingStages) {
      const reference = entry.name === 'opd-round-2' ? 'opd' : entry.name;
      expect(named).toMatch(
        new RegExp(`(stages\\.${reference}\\.manifestUri|runs/[^ ]+/${entry.name}/manifest\\.json)`),
      );
    }
    const heldOut = evalConfig.suites.harness_variant_qa.heldOutFamilies;
    expect(heldOut).toEqual(['hooks']);
    // rl trains on its own episodes: a held-out family needs weight 0 there.
    const rlFamilies = ((stage('rl')?.template ?? stage('rl')?.input) as { families?: Record<string, number> })
      .families;
    for (const family of heldOut) expect(rlFamilies?.[family]).toBe(0);
    // augment's variants reach training only through sft_data, which holds the family out.
    const shard = (stage('sft_data')?.template ?? stage('sft_data')?.input) as { heldOut?: { families?: string[] } };
    expect(shard.heldOut?.families).toEqual(expect.arrayContaining(heldOut));
  });
});

describe('contamination by 13-gram overlap', () => {
  const ifeval = loadIfevalItems().find((item) => item.key === 1000) ?? loadIfevalItems()[0]!;

  it.each([
    [
      'behind a one-line prefix (distill prompts)',
      'distill',
      {
        prompt_id: 'gen-7',
        messages: [{ role: 'user', content: `Answer the next request carefully.\n${ifeval.prompt}` }],
      },
      'gen-7',
    ],
    [
      'sent as content parts (shard conversations)',
      'shard',
      {
        id: 'conv-3',
        messages: [
          { role: 'system', content: 'You are a helpful assistant.' },
          { role: 'user', content: [{ type: 'text', text: ifeval.prompt }] },
        ],
      },
      'conv-3',
    ],
    [
      'in a tool result (rl episodes)',
      'rl',
      {
        index: 4,
        task_id: 'task-9',
        messages: JSON.stringify([
          { role: 'user', content: 'look this up' },
          { role: 'tool', content: `search result 1: ${ifeval.prompt} (cached page)` },
        ]),
      },
      'task-9#4',
    ],
  ])('refuses (exit 2) an IFEval prompt %s, naming the training record', async (_, stage, record, recordId) => {
    const store = await scratch();
    const manifest = await stageOutput(store, `train/${stage}`, stage, [
      { id: 'other', prompt: 'hello there' },
      record,
    ]);
    const error = await refusal(store, {
      models: [{ label: 'served', model: { adapter: 'openai', baseUrl: 'http://127.0.0.1:9/v1', model: 'x' } }],
      suites: { ifeval: { keys: [ifeval.key] } },
      trainingManifests: [manifest],
    });
    expect(error.message).toMatch(/^\[EVAL_CONTAMINATED\] 1 eval item\(s\)/);
    expect(error.message).toContain(
      `ifeval/ifeval-${ifeval.key} (100% of its n-grams in record ${recordId} of ${store.uriOf(`train/${stage}/part-00000.jsonl.gz`)})`,
    );
    expect(await store.head('eval/plan.json')).toBeUndefined();
  });

  it('with allowOverlap lists each hit with its training record id in scores.json and the report', async () => {
    const server = await OpenAiTestServer.start();
    try {
      const store = await scratch();
      const manifest = await stageOutput(store, 'train/distill', 'distill', [
        { prompt_id: 'gen-7', messages: [{ role: 'user', content: `Please: ${ifeval.prompt}` }] },
        { prompt_id: 'gen-8', prompt: ifeval.prompt.toUpperCase() },
      ]);
      await runEval(store, {
        models: [{ label: 'served', model: { adapter: 'openai', baseUrl: server.baseUrl, model: 'test-model' } }],
        suites: { ifeval: { keys: [ifeval.key] } },
        trainingManifests: [manifest],
        allowOverlap: true,
        bootstrapSamples: 100,
      });
      const scores = await scoresOf(store);
      const source = store.uriOf('train/distill/part-00000.jsonl.gz');
      expect(scores.contamination.ngram).toEqual({ n: 13, threshold: 0.5 });
      expect(scores.contamination.overlapping).toEqual([
        {
          suite: 'ifeval',
          itemId: `ifeval-${ifeval.key}`,
          matchedBy: 'ngram',
          records: 2,
          hits: [
            { record: 'gen-7', source, line: 1, share: 1 },
            { record: 'gen-8', source, line: 2, share: 1 },
          ],
        },
      ]);
      const report = (await store.getBuffer('eval/report.html')).toString('utf8');
      expect(report).toContain(
        `ifeval/ifeval-${ifeval.key} (ngram: record gen-7 of ${source}, 100% and 1 more record(s))`,
      );
    } finally {
      await server.close();
    }
  }, 60_000);

  it('the threshold is the share of an item n-grams one record must hold; short items match only whole', () => {
    const words = Array.from({ length: 30 }, (_, index) => `word${index}`);
    const prompt = words.join(' ');
    const half = words.slice(0, 19).join(' '); // 7 of the item's 18 13-grams
    const check = (threshold: number, text: string) => {
      const index = new NgramIndex(
        [
          { suite: 'custom', id: 'long', text: prompt },
          { suite: 'custom', id: 'short', text: 'Say hi, politely.' },
        ],
        { n: 13, threshold },
      );
      index.checkRecord([text], { record: 'r', source: 's', line: 1 });
      return index.overlaps().map((overlap) => [overlap.itemId, overlap.hits?.[0]?.share]);
    };
    expect(check(0.5, half)).toEqual([]);
    expect(check(0.35, half)).toEqual([['long', 0.389]]);
    expect(check(0.5, `PREFIX line.\n${prompt.toUpperCase()}`)).toEqual([['long', 1]]);
    // A short item inside a longer text is a common phrase, not a leak; the same text whole is.
    expect(check(0.5, 'please say hi politely to the guests')).toEqual([]);
    expect(check(0.5, 'say HI politely')).toEqual([['short', 1]]);
  });
});
