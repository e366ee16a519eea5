/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../../shared/artifacts/file-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { readParquet } from '../../shared/artifacts/parquet-codec';
import { HatError } from '../../shared/errors';
import { silentLogger } from '../../shared/log/logger';
import { OnnxDecoder } from '../../shared/models/onnx/onnx-decoder';
import { startServeServer, type ServeServer } from '../../serve/serve-server';
import { DistillModelCache } from './distill-models';
import { distillStage } from './processor';
import type { RolloutRecord } from './rollout-records';
import type { DistillStats } from './rollout-stats';
import { makeTinyDistillModels, tinyDistillConfig, type TinyDistillModels } from './testing/tiny-distill-models';

let root: string;
let models: TinyDistillModels;
let serve: ServeServer;
let studentDecoder: OnnxDecoder;
const cache = new DistillModelCache();

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'hat-distill-served-'));
  models = makeTinyDistillModels(join(root, 'models'));
  serve = await startServeServer({ model: models.studentDir, servedModelName: 'student', intraOpThreads: 1 });
  studentDecoder = await OnnxDecoder.load(models.studentDir, { intraOpThreads: 1 });
});

afterAll(async () => {
  await cache.close();
  await serve?.close();
  await studentDecoder?.close();
  await rm(root, { recursive: true, force: true });
});

function servedStudent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    adapter: 'vllm',
    baseUrl: serve.baseUrl,
    model: 'student',
    dummyWeights: true,
    maxRetries: 0,
    tokenizer: { modelDir: models.studentDir },
    ...overrides,
  };
}

async function runDistill(config: Record<string, unknown>) {
  const store = new FileArtifactStore(await mkdtemp(join(root, 'run-')));
  await runStageLocally(distillStage, config, {
    store,
    openObject: (uri) => openArtifactObject(uri),
    logger: silentLogger(),
    seed: 'served',
    services: { distillModels: cache },
  });
  const records: RolloutRecord[] = [];
  for await (const record of readJsonl<RolloutRecord>(store, 'part-00000.jsonl.gz')) records.push(record);
  return { store, records };
}

describe('distill with a student served by hat serve (vLLM /v1/completions, token ids)', () => {
  it('records the served samples with logprobs equal to the student scoring its own ids, dummy weights on every row', async () => {
    const { store, records } = await runDistill(
      tinyDistillConfig(models, { student: servedStudent(), prompts: [{ kind: 'builtin', limit: 2 }] }),
    );
    expect(records).toHaveLength(4);
    for (const record of records) {
      expect(record).toMatchObject({
        student_engine: 'vllm',
        dummy_weights: true,
        student_model: 'student',
        student_logprob_temperature: 1,
      });
      expect(record.response_ids.length).toBeGreaterThan(0);
      // vLLM's raw logprobs at temperature 1 are the student's own logprobs of the ids it sampled.
      const scored = await studentDecoder.score(record.prompt_ids, record.response_ids, { temperature: 1 });
      record.rollout_log_probs.forEach((logprob, index) =>
        expect(logprob).toBeCloseTo(scored.tokens[index].logprob, 3),
      );
    }
    // Samples differ by seed.
    expect(records[0].response_ids).not.toEqual(records[1].response_ids);
    const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as DistillStats;
    expect(stats.models.student).toMatchObject({ engine: 'vllm', modelId: 'student', dummyWeights: true });
    const rows = await readParquet(store, 'part-00000.parquet');
    expect(rows.every((row) => row.dummy_weights === true && row.student_engine === 'vllm')).toBe(true);
  });

  it('refuses, exit 2, a served student whose logprobs are not at the KL temperature', async () => {
    const failure = await runDistill(
      tinyDistillConfig(models, { student: servedStudent(), sampling: { temperature: 0.7, maxNewTokens: 10 } }),
    ).catch((error: unknown) => error);
    expect(HatError.isInstance(failure) && failure.code).toBe('LOGPROB_DISTRIBUTION_MISMATCH');
    expect((failure as HatError).exitCode).toBe(2);
    expect((failure as Error).message).toContain('logprobTemperature: 1');
  });
});
