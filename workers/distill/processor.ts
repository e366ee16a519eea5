/**
 * distill stage. Input: prompt sources (the shipped instruction set, JSONL files, simulator
 * tasks rendered through a harness), a student (any adapter that samples token ids: in-process
 * ONNX, vLLM, SGLang) and a teacher (any adapter that scores them), samples per prompt, sampling
 * settings, logprob temperature, teacher top-k.
 * Plan: checks the pair (tokenizers agree, the teacher can score at the logprob temperature),
 * writes the prompt snapshot `prompts.jsonl.gz` and `prompt-sources.json`, and cuts the prompts
 * into parts. Part i: renders its prompts with the student's chat template, samples with token
 * logprobs, has the teacher score exactly those token ids, and writes `part-NNNNN.parquet` and
 * `part-NNNNN.jsonl.gz` (the same records). Finish: `stats.json`, then `manifest.json` last.
 * Idempotency: object keys come from the part index; samples are seeded by (seed, source, prompt
 * id, sample index), so a retried or re-planned part writes identical bytes. Retried: transient
 * faults (a teacher server's 5xx/429/timeouts, the store); never: bad config or prompts,
 * mismatched tokenizers, a teacher that cannot score at the logprob temperature.
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, type ManifestObject } from '../../shared/artifacts/manifest';
import { writeParquet } from '../../shared/artifacts/parquet-codec';
import { HatError } from '../../shared/errors';
import { canonicalJson, hashValue, sha256Hex } from '../../shared/hash/hash';
import { logprobTemperatureOf } from '../../shared/models/onnx/token-sampler';
import { stopTokenIdsOf } from '../../shared/models/token-exact/token-exact-episode';
import { renderServedPrompt } from '../../shared/text/served-prompt';
import {
  distillContract,
  type DistillInput,
  type DistillModelsSummary,
  type DistillOutput,
  type DistillPartInput,
  type DistillPartOutput,
  type SourceTotals,
} from './distill-contract';
import {
  checkLogprobTemperature,
  checkStudentLogprobs,
  processDistillModels,
  resolveLogprobTemperature,
  type DistillModelCache,
  type DistillModels,
} from './distill-models';
import { DISTILL_PROMPTS_SCHEMA_VERSION, distillPromptSchema, loadPrompts, type DistillPrompt } from './prompt-sources';
import { buildRolloutRecord, DISTILL_ROLLOUT_SCHEMA_VERSION, rolloutColumns } from './rollout-records';
import { addRecord, buildStats, emptyTotals, type DistillStats } from './rollout-stats';

declare module '../../queues/stage-kit/define-stage' {
  interface StageServices {
    /** Student/teacher models shared by the distill parts of one process. Default: a process-wide cache. */
    distillModels?: DistillModelCache;
  }
}

const promptsObject = 'prompts.jsonl.gz';
const sourcesObject = 'prompt-sources.json';
const statsObject = 'stats.json';

/**
 * Templates that print the date (Llama's `strftime_now`) get this fixed moment, so the same
 * prompts always give the same token ids.
 */
const renderMoment = new Date('2025-01-01T00:00:00Z');

function modelsOf(deps: StageDeps): DistillModelCache {
  return deps.services.distillModels ?? processDistillModels;
}

/** Reads the prompt sources, checks the models, writes the snapshot, and cuts the prompts into parts. */
export async function planDistill(input: DistillInput, deps: StageDeps): Promise<DistillPartInput[]> {
  const logprobTemperature = resolveLogprobTemperature(input);
  const models = { student: input.student, teacher: input.teacher, modelCacheDir: input.modelCacheDir };
  // Before any part runs: a bad pair fails the stage once, with the reason; what the config alone settles first.
  const pair = modelsOf(deps).pair(models, { logger: deps.logger });
  checkLogprobTemperature(pair.teacher, logprobTemperature);
  checkStudentLogprobs(pair.student, input.sampling, logprobTemperature);
  await modelsOf(deps).open(models, { logger: deps.logger, signal: deps.signal, openObject: deps.openObject });
  const { prompts, lineage } = await loadPrompts(input, deps.openObject);
  const written = await writeJsonl(deps.store, deps.output.key(promptsObject), prompts, {
    schema: distillPromptSchema,
  });
  const counts = new Map<string, number>();
  for (const prompt of prompts) counts.set(prompt.source, (counts.get(prompt.source) ?? 0) + 1);
  await deps.store.put(
    deps.output.key(sourcesObject),
    `${JSON.stringify({ lineage, sources: Object.fromEntries(counts) }, null, 2)}\n`,
    { contentType: 'application/json' },
  );
  const parts: DistillPartInput[] = [];
  for (let start = 0; start < prompts.length; start += input.promptsPerPart) {
    parts.push({
      index: parts.length,
      prompts: {
        uri: written.uri,
        sha256: written.sha256,
        start,
        count: Math.min(input.promptsPerPart, prompts.length - start),
      },
      student: input.student,
      teacher: input.teacher,
      samplesPerPrompt: input.samplesPerPrompt,
      sampling: input.sampling,
      logprobTemperature,
      teacherTopK: input.teacherTopK,
      ...(input.enableThinking === undefined ? {} : { enableThinking: input.enableThinking }),
      ...(input.policyVersion === undefined ? {} : { policyVersion: input.policyVersion }),
      seed: input.seed ?? deps.run.seed,
      modelCacheDir: input.modelCacheDir,
    });
  }
  return parts;
}

/** One sample to draw: a rendered prompt and its seed. */
interface SampleRow {
  prompt: DistillPrompt;
  promptIds: number[];
  sampleIndex: number;
  seed: string;
}

export function createDistillProcessor(deps: StageDeps) {
  return async (part: DistillPartInput): Promise<DistillPartOutput> => {
    const prompts = await readPromptSlice(part, deps);
    const models = await modelsOf(deps).open(
      { student: part.student, teacher: part.teacher, modelCacheDir: part.modelCacheDir },
      { logger: deps.logger, signal: deps.signal, openObject: deps.openObject },
    );
    const rows = renderRows(prompts, part, models);
    const total = rows.length;
    deps.progress({ done: 0, total, message: 'sampling' });
    const samples = await sampleRows(rows, part, models, deps, (done) =>
      deps.progress({ done, total, message: 'sampling' }),
    );
    const studentLogprobs = await studentLogprobsAt(rows, samples, part, models, deps.signal);
    deps.progress({ done: total, total, message: 'teacher scoring' });
    const requests = rows.map((row, index) => ({ promptIds: row.promptIds, completionIds: samples[index].tokenIds }));
    const teacherScores = await models.teacher.score(requests, {
      temperature: part.logprobTemperature,
      topK: part.teacherTopK,
      signal: deps.signal,
    });
    const summary = modelsSummary(models, part);
    const records = rows.map((row, index) => {
      const sample = samples[index];
      return buildRolloutRecord({
        source: row.prompt.source,
        promptId: row.prompt.id,
        sampleIndex: row.sampleIndex,
        seed: row.seed,
        promptIds: row.promptIds,
        responseIds: sample.tokenIds,
        finishReason: sample.finishReason,
        studentLogprobs: studentLogprobs[index],
        teacher: teacherScores[index],
        teacherTopK: part.teacherTopK,
        responseText: models.studentTokenizer.decode(sample.tokenIds),
        studentLogprobTemperature: summary.student.logprobTemperature,
        teacherLogprobTemperature: summary.teacher.logprobTemperature,
        tokenizerFingerprint: summary.tokenizer.fingerprint,
        studentModel: summary.student.modelId,
        teacherModel: summary.teacher.modelId,
        policyVersion: part.policyVersion ?? 1,
        studentEngine: summary.student.engine,
        dummyWeights: summary.student.dummyWeights || summary.teacher.dummyWeights,
      });
    });
    const sources: Record<string, SourceTotals> = {};
    for (const record of records) addRecord((sources[record.source] ??= emptyTotals()), record);
    const name = deps.part?.id ?? `part-${String(part.index).padStart(5, '0')}`;
    const parquet = await writeParquet(
      deps.store,
      deps.output.key(`${name}.parquet`),
      rolloutColumns,
      records as unknown as Record<string, unknown>[],
      {
        metadata: parquetMetadata(summary),
      },
    );
    const jsonl = await writeJsonl(deps.store, deps.output.key(`${name}.jsonl.gz`), records);
    deps.progress({ done: total, total, message: 'written' });
    const ref = (info: { key: string; uri: string; sha256: string; bytes: number; records: number }) => ({
      key: info.key,
      uri: info.uri,
      sha256: info.sha256,
      bytes: info.bytes,
      records: info.records,
    });
    return { parquet: ref(parquet), jsonl: ref(jsonl), rollouts: records.length, sources, models: summary };
  };
}

/** Writes `stats.json` and the manifest (last) from the parts' totals. */
export async function finishDistill(
  input: DistillInput,
  parts: DistillPartOutput[],
  deps: StageDeps,
): Promise<DistillOutput> {
  const models = parts[0]?.models;
  if (!models)
    throw new HatError(
      'DISTILL_NO_PARTS',
      'distill finished without parts; plan always makes at least one, so this is a bug',
    );
  if (parts.some((part) => hashValue(part.models) !== hashValue(models))) {
    throw new HatError(
      'DISTILL_MODELS_CHANGED',
      'distill parts report different models or tokenizer checks (a model changed while the stage ran); rerun the stage',
    );
  }
  const stats: DistillStats = buildStats(
    parts.map((part) => part.sources),
    {
      models,
      sampling: { ...input.sampling, samplesPerPrompt: input.samplesPerPrompt, seed: input.seed ?? deps.run.seed },
      teacherTopK: input.teacherTopK,
    },
  );
  const statsInfo = await deps.store.put(deps.output.key(statsObject), `${JSON.stringify(stats, null, 2)}\n`, {
    contentType: 'application/json',
  });
  const promptsKey = deps.output.key(promptsObject);
  const promptsBytes = await deps.store.getBuffer(promptsKey);
  const sourcesKey = deps.output.key(sourcesObject);
  const sourcesBytes = await deps.store.getBuffer(sourcesKey);
  const lineage = (JSON.parse(sourcesBytes.toString('utf8')) as { lineage: Array<{ uri: string; sha256: string }> })
    .lineage;
  const objects: ManifestObject[] = [
    ...parts.flatMap((part) => [
      { ...part.parquet, schemaVersion: DISTILL_ROLLOUT_SCHEMA_VERSION, format: 'parquet' },
      { ...part.jsonl, schemaVersion: DISTILL_ROLLOUT_SCHEMA_VERSION, format: 'jsonl.gz' },
    ]),
    {
      key: promptsKey,
      uri: deps.store.uriOf(promptsKey),
      sha256: sha256Hex(promptsBytes),
      bytes: promptsBytes.length,
      records: stats.global.prompts,
      schemaVersion: DISTILL_PROMPTS_SCHEMA_VERSION,
      format: 'jsonl.gz',
    },
    {
      key: sourcesKey,
      uri: deps.store.uriOf(sourcesKey),
      sha256: sha256Hex(sourcesBytes),
      bytes: sourcesBytes.length,
      schemaVersion: DISTILL_PROMPTS_SCHEMA_VERSION,
      format: 'json',
    },
    manifestObjectOf(statsInfo, { schemaVersion: stats.schemaVersion, format: 'json' }),
  ];
  // The policy version in the stats lets a trainer handoff say which version each dataset came from.
  const manifestStats = { ...(stats as unknown as Record<string, unknown>), policyVersion: input.policyVersion ?? 1 };
  const { info } = await writeStageManifest(deps, {
    objects,
    lineage: { inputs: lineage, configHash: hashValue(input) },
    stats: manifestStats,
  });
  return {
    manifestUri: info.uri,
    statsUri: statsInfo.uri,
    parts: parts.length,
    prompts: stats.global.prompts,
    rollouts: stats.global.samples,
    meanReverseKl: stats.global.meanReverseKl,
    dummyWeights: stats.dummyWeights,
    studentEngine: models.student.engine,
  };
}

/** This part's prompts from the snapshot, after checking the snapshot is the one planned. */
async function readPromptSlice(part: DistillPartInput, deps: StageDeps): Promise<DistillPrompt[]> {
  const { store, key } = deps.openObject(part.prompts.uri);
  const bytes = await store.getBuffer(key);
  if (sha256Hex(bytes) !== part.prompts.sha256) {
    throw new HatError(
      'DISTILL_PROMPTS_CHANGED',
      `${part.prompts.uri} changed after the stage was planned (sha256 differs); rerun the whole stage`,
    );
  }
  const prompts: DistillPrompt[] = [];
  let index = 0;
  for await (const prompt of readJsonl(store, key, { schema: distillPromptSchema })) {
    if (index >= part.prompts.start && index < part.prompts.start + part.prompts.count) prompts.push(prompt);
    index++;
  }
  return prompts;
}

/** Renders every prompt with the student's chat template (generation prompt on) and tokenizer; one row per sample. */
function renderRows(prompts: DistillPrompt[], part: DistillPartInput, models: DistillModels): SampleRow[] {
  const tokenizer = models.studentTokenizer;
  return prompts.flatMap((prompt) => {
    // Hook messages normalized for the student's template, as the shard and rl stages train it.
    const { text } = renderServedPrompt(tokenizer, prompt.messages, prompt.tools ?? [], {
      enableThinking: part.enableThinking,
      now: renderMoment,
    });
    const promptIds = tokenizer.encode(text);
    return Array.from({ length: part.samplesPerPrompt }, (_, sampleIndex) => ({
      prompt,
      promptIds,
      sampleIndex,
      // Independent of how prompts are cut into parts and batches.
      seed: `${part.seed}/${prompt.source}/${prompt.id}/${sampleIndex}`,
    }));
  });
}

/** A student sample: its ids, and logprobs at the sampling temperature's logprob temperature (and at 1 for in-process students). */
interface StudentSample {
  tokenIds: number[];
  finishReason: 'stop' | 'length';
  logprobs: number[];
  rawLogprobs?: number[];
}

/** The integer seed a served student gets for a row's string seed (vLLM `seed`, SGLang `sampling_seed`: 31-bit). */
function integerSeedOf(seed: string): number {
  return Number.parseInt(sha256Hex(seed).slice(0, 8), 16) & 0x7fffffff;
}

/**
 * Student samples with per-token logprobs: in-process, `batchSize` sequences per forward batch;
 * served, one token-id request per sample (the endpoint's concurrency limit applies).
 */
async function sampleRows(
  rows: SampleRow[],
  part: DistillPartInput,
  models: DistillModels,
  deps: StageDeps,
  onProgress: (done: number) => void,
): Promise<StudentSample[]> {
  const { sampling } = part;
  const student = models.student;
  if (!student) {
    let done = 0;
    const stopTokenIds = stopTokenIdsOf(models.studentTokenizer);
    return Promise.all(
      rows.map(async (row) => {
        const sampled = await models.studentSampler.sample({
          promptIds: row.promptIds,
          sampling: { temperature: sampling.temperature, topP: sampling.topP, topK: sampling.topK },
          maxTokens: sampling.maxNewTokens,
          seed: integerSeedOf(row.seed),
          stopTokenIds,
          signal: deps.signal,
        });
        onProgress(++done);
        return { tokenIds: sampled.tokenIds, finishReason: sampled.finishReason, logprobs: sampled.logprobs };
      }),
    );
  }
  const batchSize = student.batchSize;
  const results: StudentSample[] = [];
  for (let start = 0; start < rows.length; start += batchSize) {
    const batch = rows.slice(start, start + batchSize);
    const generated = await student.exclusive((decoder) =>
      decoder.generateBatch(
        batch.map((row) => ({ promptIds: row.promptIds, seed: row.seed })),
        {
          maxNewTokens: sampling.maxNewTokens,
          temperature: sampling.temperature,
          topP: sampling.topP,
          topK: sampling.topK,
          logprobs: true,
          signal: deps.signal,
        },
      ),
    );
    for (const result of generated) {
      const tokens = result.tokens ?? [];
      results.push({
        tokenIds: result.tokenIds,
        finishReason: result.finishReason,
        logprobs: tokens.map((token) => token.logprob),
        rawLogprobs: tokens.map((token) => token.rawLogprob),
      });
    }
    onProgress(results.length);
  }
  return results;
}

/**
 * The student's logprobs of its own tokens at the logprob temperature: in-process sampling
 * reports them at the sampling temperature and at 1; any other temperature is scored again by
 * the student. A served student's logprobs were checked at plan to be at the logprob temperature.
 */
async function studentLogprobsAt(
  rows: SampleRow[],
  samples: StudentSample[],
  part: DistillPartInput,
  models: DistillModels,
  signal: AbortSignal,
): Promise<number[][]> {
  const temperature = part.logprobTemperature;
  if (!models.student) return samples.map((sample) => sample.logprobs);
  const sampledAt = logprobTemperatureOf(part.sampling.temperature);
  if (temperature === sampledAt) return samples.map((sample) => sample.logprobs);
  if (temperature === 1) return samples.map((sample) => sample.rawLogprobs ?? []);
  const rescored = await models.student.score(
    rows.map((row, index) => ({ promptIds: row.promptIds, completionIds: samples[index].tokenIds })),
    { temperature, topK: 0, signal },
  );
  return rescored.map((scores) => scores.logprobs);
}

function modelsSummary(models: DistillModels, part: DistillPartInput): DistillModelsSummary {
  return {
    student: {
      engine: models.studentSampler.engine,
      modelId: models.studentSampler.modelId,
      location: models.studentSampler.location,
      dummyWeights: models.studentSampler.dummyWeights,
      logprobTemperature: part.logprobTemperature,
    },
    teacher: {
      engine: models.teacher.engine,
      modelId: models.teacher.modelId,
      location: models.teacher.location,
      dummyWeights: models.teacher.dummyWeights,
      logprobTemperature: models.teacher.fixedLogprobTemperature ?? part.logprobTemperature,
    },
    tokenizer: {
      fingerprint: models.agreement.fingerprint,
      templateHash: models.studentTokenizer.templateHash,
      verifiedBy: models.agreement.verifiedBy,
      probedTokens: models.agreement.probedTokens,
    },
  };
}

/** Parquet footer: what a reader needs to trust the numbers without the manifest. */
function parquetMetadata(summary: DistillModelsSummary): Record<string, string> {
  return {
    schema_version: String(DISTILL_ROLLOUT_SCHEMA_VERSION),
    tokenizer_fingerprint: summary.tokenizer.fingerprint,
    chat_template_hash: summary.tokenizer.templateHash,
    student: canonicalJson(summary.student),
    teacher: canonicalJson(summary.teacher),
    dummy_weights: String(summary.student.dummyWeights || summary.teacher.dummyWeights),
  };
}

export const distillStage = defineStage({
  ...distillContract,
  plan: planDistill,
  createProcessor: createDistillProcessor,
  finish: finishDistill,
});
