/**
 * eval stage. Input: models under test (each a model config with a label), suites with sizes and
 * seeds (live_stream_qa, harness_variant_qa, ifeval, custom), an optional judge, optional
 * training manifests to check contamination against, the canonical harness.
 * Plan: loads the harness, reads what training saw, builds every suite's items (held-out tasks
 * in every category, their HSA variants, IFEval prompts, custom prompts), refuses items that
 * overlap training data (exit 2, unless allowOverlap), writes `items/<suite>.jsonl.gz` and
 * `plan.json`, and cuts (model × suite) into parts.
 * Part: one model on a slice of one suite: episodes under the canonical harness or a variant,
 * or single prompts with rule checks; the judge where configured; `results/<part>.jsonl.gz`.
 * Finish: `scores.json` (leaderboard, breakdowns, bootstrap intervals, paired comparisons),
 * `report.html`, then `manifest.json` last.
 * Idempotency: object keys come from the part index; items and bootstrap draws are seeded, so
 * with deterministic models a retried part writes identical results (latency aside).
 * Retried: transient faults (store; a part where most items hit endpoint errors). Never: bad
 * config, contaminated items, an unknown instruction in a custom check.
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, type ManifestObject } from '../../shared/artifacts/manifest';
import { BadInputError, HatError } from '../../shared/errors';
import { hashValue, sha256Hex } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import { buildExperiment } from './eval-experiment';
import {
  findTaskOverlaps,
  NgramIndex,
  readTrainingFootprint,
  textItemsOf,
  type Overlap,
  type TrainedFamily,
  type TrainingFootprint,
} from './contamination';
import {
  evalContract,
  type EvalInput,
  type EvalOutput,
  type EvalPartInput,
  type EvalPartOutput,
} from './eval-contract';
import { asArtifactUri, buildSuiteItems, EVAL_ITEM_SCHEMA_VERSION } from './eval-items';
import { EVAL_RESULT_SCHEMA_VERSION, evalResultSchema, harnessUriOf, runEvalPart, type EvalResult } from './eval-part';
import { evalReportHtml } from './eval-report';
import { buildEvalScores, type ScoredModel } from './eval-scores';
import { defaultJudgeRubric, rubricHash } from './judge';
import { cacheLocationOf, defaultResponseCachePrefix, type CacheCounts } from './response-cache';
import { simulatedEndpointReason } from './item-failures';
import { LM_EVAL_RESULTS_SCHEMA_VERSION, lmEvalResultsOf } from './lm-eval-results';
import { evalSuiteNames, evalSuiteOf, evalSuites } from './suites/registry';

const planObject = 'plan.json';
const scoresObject = 'scores.json';
const reportObject = 'report.html';

/** What plan records for finish. */
interface EvalPlanRecord {
  seed: string;
  harness: { uri: string; hash: string } | null;
  suites: string[];
  itemCounts: Record<string, number>;
  /** Suite → its version and the sha256 of its data (scores.json `suites`). */
  suiteData?: Record<string, { version: number; data: { source: string; sha256: string } }>;
  items: Array<{ suite: string; key: string; uri: string; sha256: string; records: number }>;
  overlapping: Overlap[];
  /** Held-out families and operator variants training used (allowOverlap: true only; refused otherwise). */
  heldOutTrained?: { families: TrainedFamily[]; variants: Array<{ itemId: string; hash: string; stages: string[] }> };
  training: { manifests: string[]; objects: Array<{ uri: string; sha256: string }> };
  lineage: Array<{ uri: string; sha256: string }>;
}

function seedOf(input: EvalInput, deps: Pick<StageDeps, 'run'>): string {
  return input.seed ?? deps.run.seed;
}

function plannedSuites(input: EvalInput): string[] {
  return evalSuiteNames().filter((suite) => input.suites[suite] !== undefined);
}

/** The config with only the suites `keep` accepts. */
function withSuites(input: EvalInput, keep: (suite: ReturnType<typeof evalSuites>[number]) => boolean): EvalInput {
  const suites = Object.fromEntries(
    evalSuites()
      .filter((suite) => keep(suite) && input.suites[suite.name] !== undefined)
      .map((suite) => [suite.name, input.suites[suite.name]]),
  );
  return { ...input, suites };
}

function emptyFootprint(): TrainingFootprint {
  return {
    taskIds: new Set(),
    variantHashes: new Set(),
    variantDirs: new Map(),
    variantFamilies: new Map(),
    variantStages: new Map(),
    objects: [],
  };
}

/** How an overlapping item was found, for the refusal: `task id`, or the training record and share of n-grams. */
function overlapReason(overlap: Overlap): string {
  if (overlap.matchedBy === 'task_id') return 'task id';
  const hit = overlap.hits?.[0];
  const what = overlap.matchedBy === 'ngram' ? `${Math.round((hit?.share ?? 1) * 100)}% of its n-grams` : 'prompt text';
  return hit ? `${what} in record ${hit.record} of ${hit.source}` : what;
}

/** Builds and checks every suite's items, refuses contaminated ones, and cuts (model × suite × items) into parts. */
export async function planEval(input: EvalInput, deps: StageDeps): Promise<EvalPartInput[]> {
  const seed = seedOf(input, deps);
  const suites = plannedSuites(input);
  const episodic = evalSuites().some((suite) => suite.needsHarness && suites.includes(suite.name));
  // Where the response cache is: a bad prefix fails here, before any part asks a model.
  cacheLocationOf(input, deps);
  const harnessUri = harnessUriOf(input);
  const canonical = episodic ? await loadHarnessFromUri(harnessUri, deps.openObject) : undefined;
  const hash = canonical ? harnessHash(canonical) : '';
  // Suites that do not depend on what training saw first: their text items' n-grams are what
  // training records are streamed past.
  const textSuites = await buildSuiteItems(
    withSuites(input, (suite) => !suite.usesTrainingFootprint),
    canonical,
    emptyFootprint(),
    deps.openObject,
  );
  const index =
    input.trainingManifests.length > 0
      ? new NgramIndex(textItemsOf(textSuites.flatMap((suite) => suite.items)), input.contamination)
      : undefined;
  deps.progress({ message: 'reading training manifests' });
  const footprint = await readTrainingFootprint(input.trainingManifests.map(asArtifactUri), deps.openObject, index);
  deps.progress({ message: 'building eval items' });
  const configs = input.suites as Record<string, unknown>;
  // Held-out checks against what training saw (harness_variant_qa's operators): refused unless allowOverlap.
  const trainedFamilies = evalSuites()
    .filter((suite) => configs[suite.name] !== undefined)
    .flatMap((suite) => suite.trainedHeldOutFamilies?.(configs[suite.name], footprint, input.allowOverlap) ?? []);
  const episodeSuites = await buildSuiteItems(
    withSuites(input, (suite) => suite.usesTrainingFootprint),
    canonical,
    footprint,
    deps.openObject,
  );
  const order = evalSuiteNames();
  const built = [...episodeSuites, ...textSuites].sort(
    (left, right) => order.indexOf(left.suite) - order.indexOf(right.suite),
  );
  const allItems = built.flatMap((suite) => suite.items);
  const trainedVariants = built.flatMap(
    (suite) => evalSuiteOf(suite.suite).trainedHeldOutItems?.(suite.items, footprint, input.allowOverlap) ?? [],
  );
  const overlapping: Overlap[] =
    input.trainingManifests.length > 0 ? [...findTaskOverlaps(allItems, footprint), ...(index?.overlaps() ?? [])] : [];
  if (overlapping.length > 0 && !input.allowOverlap) {
    const listed = overlapping
      .slice(0, 20)
      .map((overlap) => `${overlap.suite}/${overlap.itemId} (${overlapReason(overlap)})`);
    throw new BadInputError(
      'EVAL_CONTAMINATED',
      `${overlapping.length} eval item(s) appear in the training data of trainingManifests: ${listed.join(', ')}${overlapping.length > 20 ? ', …' : ''}; ` +
        'use held-out seeds or prompts, drop those manifests, or set allowOverlap: true to evaluate anyway (the report lists them)',
    );
  }
  const items: EvalPlanRecord['items'] = [];
  for (const suite of built) {
    if (suite.items.length === 0)
      throw new BadInputError('EVAL_EMPTY_SUITE', `suites.${suite.suite} has no items; give it a size or inputs`);
    // Validated where they are read (each part reads its range through evalItemSchema), not here too.
    const written = await writeJsonl(deps.store, deps.output.key(`items/${suite.suite}.jsonl.gz`), suite.items);
    items.push({
      suite: suite.suite,
      key: written.key,
      uri: written.uri,
      sha256: written.sha256,
      records: written.records,
    });
  }
  const record: EvalPlanRecord = {
    seed,
    harness: canonical ? { uri: harnessUri, hash } : null,
    suites,
    itemCounts: Object.fromEntries(built.map((suite) => [suite.suite, suite.items.length])),
    suiteData: Object.fromEntries(built.map((suite) => [suite.suite, { version: suite.version, data: suite.data }])),
    items,
    overlapping,
    heldOutTrained: { families: trainedFamilies, variants: trainedVariants },
    training: { manifests: input.trainingManifests, objects: footprint.objects },
    lineage: built.flatMap((suite) => suite.lineage),
  };
  await deps.store.put(deps.output.key(planObject), `${JSON.stringify(record, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const parts: EvalPartInput[] = [];
  for (const model of input.models) {
    for (const suite of items) {
      if (model.suites && !model.suites.includes(suite.suite)) continue;
      for (let start = 0; start < suite.records; start += input.itemsPerPart) {
        parts.push({
          index: parts.length,
          model,
          suite: suite.suite,
          items: {
            uri: suite.uri,
            sha256: suite.sha256,
            start,
            count: Math.min(input.itemsPerPart, suite.records - start),
          },
          config: input,
          seed,
          harnessHash: hash,
        });
      }
    }
  }
  return parts;
}

export function createEvalProcessor(deps: StageDeps) {
  return (part: EvalPartInput): Promise<EvalPartOutput> => runEvalPart(part, deps);
}

/** Reads every part's results, writes `scores.json` and `report.html`, then the manifest last. */
export async function finishEval(input: EvalInput, parts: EvalPartOutput[], deps: StageDeps): Promise<EvalOutput> {
  if (parts.length === 0)
    throw new HatError(
      'EVAL_NO_PARTS',
      'eval finished without parts; plan always makes at least one, so this is a bug',
    );
  const planKey = deps.output.key(planObject);
  const plan = JSON.parse((await deps.store.getBuffer(planKey)).toString('utf8')) as EvalPlanRecord;
  const results: EvalResult[] = [];
  for (const part of parts) {
    const { records, sha256 } = await readRecordRange(deps.openObject, part.results.uri, evalResultSchema);
    if (sha256 !== part.results.sha256)
      throw new HatError(
        'EVAL_RESULTS_CHANGED',
        `${part.results.uri} changed after its part completed; rerun the stage`,
      );
    results.push(...records);
  }
  const models: ScoredModel[] = await Promise.all(
    input.models.map(async (model) => {
      const first = parts.find((part) => part.label === model.label);
      const simulated = parts.some((part) => part.label === model.label && part.model.simulated);
      // One GET /v1/models per served model: the local test server and hat serve of random weights say so there.
      const reason = simulated
        ? model.dummyWeights || 'dummy' in model.model
          ? 'DUMMY-WEIGHT MODEL: random weights'
          : 'SIMULATED: a simulation policy or random-weight model, not a trained model'
        : await simulatedEndpointReason(model.model);
      return {
        label: model.label,
        provider: first?.model.provider ?? String(model.model.adapter),
        modelId: first?.model.modelId ?? '',
        config: { ...model.model },
        simulated: simulated || reason !== undefined,
        ...(reason ? { simulatedReason: reason } : {}),
      };
    }),
  );
  const judgeMissing = parts.reduce((sum, part) => sum + part.judgeMissing, 0);
  const rubric = input.judge?.rubric ?? defaultJudgeRubric;
  const judgeModel = input.judge?.model as { adapter: string; model?: unknown; modelDir?: unknown } | undefined;
  const scores = buildEvalScores(results, {
    runId: deps.run.id,
    seed: plan.seed,
    models,
    suites: plan.suites,
    itemCounts: plan.itemCounts,
    ...(plan.suiteData ? { suiteData: plan.suiteData } : {}),
    compare:
      input.compare ?? input.models.slice(1).map((model) => [input.models[0].label, model.label] as [string, string]),
    bootstrapSamples: input.bootstrapSamples,
    ...(input.judge && judgeModel
      ? {
          judge: {
            model: String(judgeModel.model ?? judgeModel.modelDir ?? judgeModel.adapter),
            rubricVersion: rubric.version,
            rubricHash: rubricHash(rubric),
            suites: input.judge.suites,
            missing: judgeMissing,
          },
        }
      : {}),
    contamination: {
      manifests: plan.training.manifests,
      checked: plan.training.objects.length,
      overlapping: plan.overlapping,
      allowOverlap: input.allowOverlap,
      ngram: input.contamination,
      ...(plan.heldOutTrained && plan.heldOutTrained.families.length + plan.heldOutTrained.variants.length > 0
        ? { heldOutTrained: plan.heldOutTrained }
        : {}),
    },
  });
  const cache = cacheLocationOf(input, deps);
  if (cache && parts.some((part) => part.cache)) {
    const counts: Record<string, CacheCounts> = {};
    for (const part of parts) {
      if (!part.cache) continue;
      const entry = (counts[part.label] ??= { hits: 0, misses: 0 });
      entry.hits += part.cache?.hits ?? 0;
      entry.misses += part.cache?.misses ?? 0;
    }
    // The default prefix relative to the artifact root: scores.json does not depend on where the root is.
    scores.cache = { prefix: input.cache.prefix ?? defaultResponseCachePrefix, models: counts };
  }
  if (input.experiment) {
    deps.progress({ message: 'experiment: arms, paired differences, claims' });
    scores.experiment = await buildExperiment(input.experiment, results, {
      bootstrapSamples: input.bootstrapSamples,
      seed: plan.seed,
      modelDirs: Object.fromEntries(
        input.models.map((model) => {
          const dir = (model.model as { modelDir?: unknown }).modelDir;
          return [model.label, typeof dir === 'string' ? dir : undefined];
        }),
      ),
    });
  }
  const scoresInfo = await deps.store.put(deps.output.key(scoresObject), `${JSON.stringify(scores, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const reportInfo = await deps.store.put(deps.output.key(reportObject), evalReportHtml(scores), {
    contentType: 'text/html; charset=utf-8',
  });
  // The same figures in lm-evaluation-harness's results-JSON shape, one file per model (lm-eval-results.ts).
  const lmEvalObjects: ManifestObject[] = [];
  for (const model of input.models) {
    const document = lmEvalResultsOf(scores, results, model);
    if (!document) continue;
    const info = await deps.store.put(
      deps.output.key(`lm-eval/${model.label}/results.json`),
      `${JSON.stringify(document, null, 2)}\n`,
      { contentType: 'application/json' },
    );
    lmEvalObjects.push(
      manifestObjectOf(info, {
        schemaVersion: LM_EVAL_RESULTS_SCHEMA_VERSION,
        format: 'json',
        kind: 'lm-eval-results',
      }),
    );
  }
  const stored = async (
    key: string,
    details: { schemaVersion: number; format: string; records?: number; kind: string },
  ): Promise<ManifestObject> => {
    const bytes = await deps.store.getBuffer(key);
    return manifestObjectOf(
      { key, uri: deps.store.uriOf(key), sha256: sha256Hex(bytes), bytes: bytes.length },
      details,
    );
  };
  const objects: ManifestObject[] = [
    ...parts.map((part) => ({
      ...part.results,
      schemaVersion: EVAL_RESULT_SCHEMA_VERSION,
      format: 'jsonl.gz',
      kind: 'results',
    })),
    ...(await Promise.all(
      plan.items.map((entry) =>
        stored(entry.key, {
          schemaVersion: EVAL_ITEM_SCHEMA_VERSION,
          format: 'jsonl.gz',
          records: entry.records,
          kind: 'items',
        }),
      ),
    )),
    await stored(planKey, { schemaVersion: EVAL_ITEM_SCHEMA_VERSION, format: 'json', kind: 'plan' }),
    manifestObjectOf(scoresInfo, { schemaVersion: scores.schemaVersion, format: 'json', kind: 'scores' }),
    manifestObjectOf(reportInfo, { schemaVersion: scores.schemaVersion, format: 'html', kind: 'report' }),
    ...lmEvalObjects,
  ];
  const { info } = await writeStageManifest(deps, {
    objects,
    lineage: {
      inputs: [
        ...(plan.harness ? [{ uri: plan.harness.uri, sha256: plan.harness.hash }] : []),
        ...plan.lineage,
        ...plan.training.objects,
      ],
      configHash: hashValue(input),
    },
    stats: {
      leaderboard: scores.leaderboard,
      metrics: Object.fromEntries(Object.entries(scores.scores).map(([label, entry]) => [label, entry.metrics])),
    },
  });
  return {
    manifestUri: info.uri,
    scoresUri: scoresInfo.uri,
    reportUri: reportInfo.uri,
    items: results.length,
    leaderboard: scores.leaderboard,
    simulatedModels: models.filter((model) => model.simulated).map((model) => model.label),
    overlapping: plan.overlapping.length,
    judgeMissing,
    ...(scores.cache
      ? {
          cache: Object.values(scores.cache.models).reduce(
            (sum, counts) => ({ hits: sum.hits + counts.hits, misses: sum.misses + counts.misses }),
            { hits: 0, misses: 0 },
          ),
        }
      : {}),
    errors: Object.fromEntries(
      Object.entries(scores.scores).map(([label, entry]) => [
        label,
        { failed: entry.modelErrors, items: entry.evaluated, rate: entry.errorRate },
      ]),
    ),
    ...(scores.experiment
      ? {
          claims: scores.experiment.claims.map((claim) => ({ reproduced: claim.reproduced, sentence: claim.sentence })),
        }
      : {}),
  };
}

export const evalStage = defineStage({
  ...evalContract,
  plan: planEval,
  createProcessor: createEvalProcessor,
  finish: finishEval,
});
