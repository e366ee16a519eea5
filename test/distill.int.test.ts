/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { parquetMetadataOf, readParquet } from '../shared/artifacts/parquet-codec';
import { silentLogger } from '../shared/log/logger';
import { OnnxDecoder } from '../shared/models/onnx/onnx-decoder';
import { DistillModelCache, processDistillModels } from '../workers/distill/distill-models';
import type { DistillOutput } from '../workers/distill/distill-contract';
import { distillStage } from '../workers/distill/processor';
import type { RolloutRecord } from '../workers/distill/rollout-records';
import type { DistillStats } from '../workers/distill/rollout-stats';
import {
  makeTinyDistillModels,
  tinyDistillConfig,
  type TinyDistillModels,
} from '../workers/distill/testing/tiny-distill-models';
import { runHatInProcess } from './support/hat-in-process';

/**
 * The distill stage end to end through `hat stage`'s binding (runStageLocally) with two tiny
 * in-process ONNX models: records checked against independent scoring passes of both models,
 * Parquet against DuckDB, determinism, idempotent reruns and the refusals.
 */

let root: string;
let models: TinyDistillModels;
let studentDecoder: OnnxDecoder;
let teacherDecoder: OnnxDecoder;
const cache = new DistillModelCache();

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'hat-distill-'));
  models = makeTinyDistillModels(join(root, 'models'));
  studentDecoder = await OnnxDecoder.load(models.studentDir, { intraOpThreads: 1 });
  teacherDecoder = await OnnxDecoder.load(models.teacherDir, { intraOpThreads: 1 });
});

afterAll(async () => {
  await cache.close();
  await studentDecoder?.close();
  await teacherDecoder?.close();
  await rm(root, { recursive: true, force: true });
});

let runCount = 0;

async function runDistill(config: Record<string, unknown>, options: { out?: string; seed?: string } = {}) {
  const out = options.out ?? join(root, `run-${++runCount}`);
  const store = new FileArtifactStore(out);
  const result = await runStageLocally(distillStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: options.seed ?? 'distill-test',
    clock: { now: () => Date.parse('2025-01-31T02:00:00Z') },
    services: { distillModels: cache },
  });
  return { out, store, output: result.output as DistillOutput, parts: result.parts };
}

async function recordsOf(store: FileArtifactStore, key: string): Promise<RolloutRecord[]> {
  const records: RolloutRecord[] = [];
  for await (const record of readJsonl<RolloutRecord>(store, key)) records.push(record);
  return records;
}

async function userPromptFile(): Promise<string> {
  const store = new FileArtifactStore(join(root, 'inputs'));
  const info = await writeJsonl(store, 'my-prompts.jsonl.gz', [
    { id: 'greet', prompt: 'Say hello in French.', system: 'Answer in one word.' },
    {
      id: 'price',
      messages: [{ role: 'user', content: '这件外套多少钱？' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_price',
            description: 'Price of an item',
            parameters: { type: 'object', properties: { item: { type: 'string' } } },
          },
        },
      ],
    },
  ]);
  return info.uri;
}

function baseConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return tinyDistillConfig(models, extra);
}

function expectClose(actual: readonly number[], expected: readonly number[], tolerance = 1e-4): void {
  expect(actual).toHaveLength(expected.length);
  const worst = Math.max(0, ...actual.map((value, index) => Math.abs(value - expected[index])));
  expect(worst).toBeLessThan(tolerance);
}

describe('distill stage with in-process ONNX student and teacher', () => {
  it('writes aligned rollouts whose logprobs match independent scoring passes of both models', async () => {
    const userUri = await userPromptFile();
    const { store, output, parts } = await runDistill(baseConfig({ inputs: [userUri] }));
    expect(parts).toBe(3);
    expect(output).toMatchObject({ parts: 3, prompts: 6, rollouts: 12, dummyWeights: true });

    const manifest = await readManifest(store, 'manifest.json');
    expect(manifest.objects.map((object) => object.key)).toEqual([
      'part-00000.jsonl.gz',
      'part-00000.parquet',
      'part-00001.jsonl.gz',
      'part-00001.parquet',
      'part-00002.jsonl.gz',
      'part-00002.parquet',
      'prompt-sources.json',
      'prompts.jsonl.gz',
      'stats.json',
    ]);
    const stats = manifest.stats as unknown as DistillStats;
    expect(stats.dummyWeights).toBe(true);
    expect(stats.models.student).toMatchObject({
      engine: 'onnx',
      modelId: 'student',
      dummyWeights: true,
      logprobTemperature: 1,
    });
    expect(stats.models.teacher).toMatchObject({
      engine: 'onnx',
      modelId: 'teacher',
      dummyWeights: true,
      logprobTemperature: 1,
    });
    expect(stats.models.tokenizer.verifiedBy).toEqual(['fingerprint']);
    expect(Object.keys(stats.sources)).toEqual(['builtin:general-instructions', 'my-prompts']);
    expect(stats.sources['my-prompts']).toMatchObject({ prompts: 2, samples: 4 });
    expect(manifest.lineage.inputs.map((input) => input.uri)).toContain(userUri);

    const records = [
      ...(await recordsOf(store, 'part-00000.jsonl.gz')),
      ...(await recordsOf(store, 'part-00001.jsonl.gz')),
      ...(await recordsOf(store, 'part-00002.jsonl.gz')),
    ];
    expect(records.map((record) => `${record.source}/${record.prompt_id}#${record.sample_index}`)).toEqual([
      'builtin:general-instructions/gi-001#0',
      'builtin:general-instructions/gi-001#1',
      'builtin:general-instructions/gi-002#0',
      'builtin:general-instructions/gi-002#1',
      'builtin:general-instructions/gi-003#0',
      'builtin:general-instructions/gi-003#1',
      'builtin:general-instructions/gi-004#0',
      'builtin:general-instructions/gi-004#1',
      'my-prompts/greet#0',
      'my-prompts/greet#1',
      'my-prompts/price#0',
      'my-prompts/price#1',
    ]);
    // The prompt is the student's chat template with the generation prompt, as byte tokens.
    const greet = records.find((record) => record.prompt_id === 'greet')!;
    expect(Buffer.from(greet.prompt_ids.filter((id) => id < 256)).toString('utf8')).toBe(
      'system\nAnswer in one word.\nuser\nSay hello in French.\nassistant\n',
    );
    const price = records.find((record) => record.prompt_id === 'price')!;
    expect(Buffer.from(price.prompt_ids.filter((id) => id < 256)).toString('utf8')).toContain('"name": "get_price"');

    let tokens = 0;
    let klSum = 0;
    for (const record of records) {
      const length = record.response_length;
      expect(record.response_ids).toHaveLength(length);
      expect(record.loss_mask).toEqual(new Array(length).fill(1));
      // Random-weight models: every row says so, not only the footer and stats.
      expect(record.dummy_weights).toBe(true);
      expect(record.reverse_kl).toEqual(
        record.rollout_log_probs.map((value, index) => Math.fround(value - record.teacher_log_probs[index])),
      );
      expect(record.teacher_top_ids).toHaveLength(length * 3);
      // The teacher scored exactly the student's token ids.
      const teacher = await teacherDecoder.score(record.prompt_ids, record.response_ids, {
        temperature: 1,
        topLogprobs: 3,
      });
      expectClose(
        record.teacher_log_probs,
        teacher.tokens.map((token) => token.logprob),
      );
      expect(record.teacher_top_ids).toEqual(
        teacher.tokens.flatMap((token) => token.top!.map((candidate) => candidate.tokenId)),
      );
      // Scoring equals sampling: the student's sampled logprobs are what scoring its own tokens gives.
      const student = await studentDecoder.score(record.prompt_ids, record.response_ids, { temperature: 1 });
      expectClose(
        record.rollout_log_probs,
        student.tokens.map((token) => token.logprob),
      );
      tokens += length;
      klSum += record.reverse_kl.reduce((sum, value) => sum + value, 0);
    }
    expect(stats.global.responseTokens).toBe(tokens);
    expect(stats.global.meanReverseKl).toBeCloseTo(klSum / tokens, 10);
    expect(output.meanReverseKl).toBe(stats.global.meanReverseKl);
  });

  it('stores Parquet that DuckDB reads back with the values of the JSONL records', async () => {
    const { out, store } = await runDistill(baseConfig({ prompts: [{ kind: 'builtin', limit: 2 }] }));
    const records = await recordsOf(store, 'part-00000.jsonl.gz');
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    try {
      const result = await connection.runAndReadAll(
        `select * from read_parquet('${join(out, 'part-00000.parquet')}') order by prompt_id, sample_index`,
      );
      expect(result.getRowObjectsJson()).toEqual(records);
    } finally {
      connection.closeSync();
    }
    const footer = await parquetMetadataOf(await store.getBuffer('part-00000.parquet'));
    expect(footer).toMatchObject({
      schema_version: '1',
      dummy_weights: 'true',
      tokenizer_fingerprint: records[0].tokenizer_fingerprint,
    });
    expect(JSON.parse(footer.teacher)).toMatchObject({ engine: 'onnx', modelId: 'teacher', logprobTemperature: 1 });
  });

  it('is deterministic under the seed, independent of parts and batches, and reruns idempotently', async () => {
    const config = baseConfig({ prompts: [{ kind: 'builtin', limit: 3 }] });
    const first = await runDistill(config);
    const second = await runDistill({
      ...config,
      promptsPerPart: 3,
      student: { ...(config.student as object), batchSize: 1 },
    });
    const firstRecords = [
      ...(await recordsOf(first.store, 'part-00000.jsonl.gz')),
      ...(await recordsOf(first.store, 'part-00001.jsonl.gz')),
    ];
    const secondRecords = await recordsOf(second.store, 'part-00000.jsonl.gz');
    expect(secondRecords.map((record) => record.response_ids)).toEqual(
      firstRecords.map((record) => record.response_ids),
    );
    for (const [index, record] of secondRecords.entries())
      expectClose(record.teacher_log_probs, firstRecords[index].teacher_log_probs, 1e-5);

    // Same config and seed: byte-identical objects; a rerun in place reuses every finished part.
    const again = await runDistill(config, { out: join(root, 'again') });
    expect(
      (await again.store.getBuffer('part-00001.parquet')).equals(await first.store.getBuffer('part-00001.parquet')),
    ).toBe(true);
    expect((await again.store.getBuffer('stats.json')).equals(await first.store.getBuffer('stats.json'))).toBe(true);
    const before = await again.store.head('part-00000.parquet');
    const rerun = await runDistill(config, { out: join(root, 'again') });
    expect(rerun.output).toEqual(again.output);
    expect((await rerun.store.head('part-00000.parquet'))?.lastModified).toEqual(before?.lastModified);

    const otherSeed = await runDistill(config, { seed: 'another-seed' });
    const otherRecords = await recordsOf(otherSeed.store, 'part-00000.jsonl.gz');
    expect(otherRecords.map((record) => record.response_ids)).not.toEqual(
      firstRecords.slice(0, otherRecords.length).map((record) => record.response_ids),
    );
  });

  it('computes both sides at the logprob temperature when sampling at another one', async () => {
    const { store } = await runDistill(
      baseConfig({
        prompts: [{ kind: 'builtin', limit: 1 }],
        sampling: { temperature: 0.7, maxNewTokens: 8 },
        logprobTemperature: 1.3,
        teacherTopK: 0,
      }),
    );
    const [record] = await recordsOf(store, 'part-00000.jsonl.gz');
    expect(record).toMatchObject({
      student_logprob_temperature: 1.3,
      teacher_logprob_temperature: 1.3,
      teacher_top_k: 0,
      teacher_top_ids: [],
    });
    const student = await studentDecoder.score(record.prompt_ids, record.response_ids, { temperature: 1.3 });
    const teacher = await teacherDecoder.score(record.prompt_ids, record.response_ids, { temperature: 1.3 });
    expectClose(
      record.rollout_log_probs,
      student.tokens.map((token) => token.logprob),
    );
    expectClose(
      record.teacher_log_probs,
      teacher.tokens.map((token) => token.logprob),
    );
    const parquet = await readParquet(store, 'part-00000.parquet');
    expect(parquet[0]).toMatchObject({ student_logprob_temperature: 1.3, teacher_logprob_temperature: 1.3 });
  });

  it('refuses a teacher whose tokenizer differs, naming both fingerprints and what to do', async () => {
    const config = baseConfig({ teacher: { adapter: 'onnx', modelDir: models.mismatchedDir, intraOpThreads: 1 } });
    const failure = runDistill(config);
    await expect(failure).rejects.toMatchObject({ code: 'TOKENIZER_MISMATCH', exitCode: 2 });
    await expect(failure).rejects.toThrow(
      /student student \(onnx, .*\) \(tokenizer fingerprint [0-9a-f]{64}\) and teacher mismatched \(onnx, .*\) \(tokenizer fingerprint [0-9a-f]{64}\) do not share a tokenizer.*Pick a teacher with the student's tokenizer/s,
    );
  });

  it('refuses a server teacher at a logprob temperature other than 1 before any work', async () => {
    const config = baseConfig({
      teacher: { adapter: 'vllm', baseUrl: 'http://127.0.0.1:9/v1', model: 'teacher' },
      sampling: { temperature: 0.6 },
    });
    await expect(runDistill(config)).rejects.toMatchObject({ code: 'LOGPROB_TEMPERATURE_MISMATCH' });
    await expect(runDistill(config)).rejects.toThrow(/set logprobTemperature: 1/);
  });

  it('`hat stage distill` reads a config in the old engine: spelling, one warning per field with file, line and the new spelling; refuses engine and adapter that disagree', async () => {
    const file = join(root, 'old-spelling.yaml');
    await writeFile(
      file,
      [
        'prompts: [{ kind: builtin, limit: 2 }]',
        `student: { engine: onnx, modelDir: "${models.studentDir}", intraOpThreads: 1 }`,
        `teacher: { engine: onnx, modelDir: "${models.teacherDir}", intraOpThreads: 1 }`,
        'samplesPerPrompt: 1',
        'sampling: { maxNewTokens: 4 }',
        '',
      ].join('\n'),
    );
    const out = pathToFileURL(join(root, 'old-spelling-out')).href;
    const environment = { HAT_LOG_LEVEL: 'silent' };
    try {
      const result = await runHatInProcess(environment, 'stage', 'distill', '--config', file, '--out', out, '--json');
      expect(result.stderr.split('\n').filter((line) => line.startsWith(`warning: ${file}`))).toEqual([
        `warning: ${file}: line 2: student.engine: engine: onnx is the old spelling of adapter; write adapter: onnx`,
        `warning: ${file}: line 3: teacher.engine: engine: onnx is the old spelling of adapter; write adapter: onnx`,
      ]);
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ rollouts: 2, studentEngine: 'onnx' });

      const both = join(root, 'both-spellings.yaml');
      await writeFile(
        both,
        `student: { engine: onnx, adapter: vllm, modelDir: "${models.studentDir}" }\nteacher: { adapter: onnx, modelDir: "${models.teacherDir}" }\n`,
      );
      const refused = await runHatInProcess(environment, 'stage', 'distill', '--config', both, '--out', out);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        `${both}: line 1: student.engine: gives engine: onnx and adapter: vllm; engine is the old spelling of adapter, so say one: remove engine (or write adapter: onnx)`,
      );
    } finally {
      await processDistillModels.close();
    }
  });
});
