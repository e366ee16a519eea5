/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { silentLogger } from '../shared/log/logger';
import { createModelClient } from '../shared/models/model-registry';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { OnnxTokenScorer } from '../shared/models/scoring/onnx-token-scorer';
import { remoteScorerConfigSchema, type RemoteScorerConfigInput } from '../shared/models/scoring/scoring-endpoint';
import { SglangTokenScorer } from '../shared/models/scoring/sglang-generate-logprobs';
import type { CompletionScores, TokenScoreRequest } from '../shared/models/scoring/token-scorer';
import { VllmTokenScorer } from '../shared/models/scoring/vllm-prompt-logprobs';
import { createOnnxPromptScorer, onnxChatResponder } from '../shared/models/testing/onnx-prompt-scorer';
import { OpenAiTestServer } from '../shared/models/testing/openai-test-server';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import type { DistillOutput } from '../workers/distill/distill-contract';
import { DistillModelCache } from '../workers/distill/distill-models';
import { distillStage } from '../workers/distill/processor';
import type { RolloutRecord } from '../workers/distill/rollout-records';
import type { DistillStats } from '../workers/distill/rollout-stats';
import {
  makeTinyDistillModels,
  tinyDistillConfig,
  type TinyDistillModels,
} from '../workers/distill/testing/tiny-distill-models';

/**
 * Teacher scoring over HTTP: the local OpenAI-compatible test server backed by the same ONNX
 * teacher that scores in-process, answering vLLM `/v1/completions` (`prompt_logprobs`) and SGLang
 * `/generate` (`input_token_logprobs`) in the servers' shapes, and its chat endpoint with the
 * ONNX client's generations. What comes over HTTP must equal the in-process numbers.
 */

let root: string;
let models: TinyDistillModels;
let teacher: OnnxTokenScorer;
let chatClient: OnnxModelClient;
let server: OpenAiTestServer;
let mismatchedScorer: OnnxTokenScorer;
let mismatchedServer: OpenAiTestServer;
const cache = new DistillModelCache();

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'hat-distill-http-'));
  models = makeTinyDistillModels(join(root, 'models'));
  teacher = new OnnxTokenScorer(new OnnxModelClient({ modelDir: models.teacherDir, intraOpThreads: 1 }), {
    modelDir: models.teacherDir,
  });
  chatClient = new OnnxModelClient({ modelDir: models.teacherDir, intraOpThreads: 1 });
  server = await OpenAiTestServer.start({
    models: ['teacher'],
    scorer: await createOnnxPromptScorer(teacher, models.teacherDir),
    responder: onnxChatResponder(chatClient),
  });
  mismatchedScorer = new OnnxTokenScorer(new OnnxModelClient({ modelDir: models.mismatchedDir, intraOpThreads: 1 }), {
    modelDir: models.mismatchedDir,
  });
  mismatchedServer = await OpenAiTestServer.start({
    models: ['mismatched'],
    scorer: await createOnnxPromptScorer(mismatchedScorer, models.mismatchedDir),
  });
});

afterAll(async () => {
  await server?.close();
  await mismatchedServer?.close();
  await cache.close();
  await teacher?.close();
  await mismatchedScorer?.close();
  await chatClient?.close();
  await rm(root, { recursive: true, force: true });
});

function remote(extra: Partial<RemoteScorerConfigInput> = {}) {
  return remoteScorerConfigSchema.parse({
    baseUrl: server.baseUrl,
    model: 'teacher',
    maxRetries: 0,
    dummyWeights: true,
    ...extra,
  });
}

async function scoringRequests(): Promise<TokenScoreRequest[]> {
  const tokenizer = await loadChatTokenizer({ modelDir: models.studentDir });
  const prompt = tokenizer.encode(
    tokenizer.render([{ role: 'user', content: 'Say hello in French. 用一句话回答。' }], { addGenerationPrompt: true }),
  );
  return [
    { promptIds: prompt, completionIds: tokenizer.encode('Bonjour ! 你好<|im_end|>') },
    { promptIds: prompt.slice(0, 5), completionIds: [104, 105] },
  ];
}

function expectSameScores(actual: CompletionScores[], expected: CompletionScores[]): void {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((scores, index) => {
    const reference = expected[index];
    expect(
      Math.max(...scores.logprobs.map((value, position) => Math.abs(value - reference.logprobs[position]))),
    ).toBeLessThan(1e-4);
    expect(scores.top?.map((candidates) => candidates.map((candidate) => candidate.tokenId))).toEqual(
      reference.top?.map((candidates) => candidates.map((candidate) => candidate.tokenId)),
    );
    const topDifferences = (scores.top ?? []).flatMap((candidates, position) =>
      candidates.map((candidate, rank) => Math.abs(candidate.logprob - reference.top![position][rank].logprob)),
    );
    expect(Math.max(0, ...topDifferences)).toBeLessThan(1e-4);
  });
}

async function postJson(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

describe('teacher scoring over HTTP', () => {
  it('gives the in-process logprobs and top-k through vLLM prompt_logprobs and SGLang input_token_logprobs', async () => {
    const requests = await scoringRequests();
    const inProcess = await teacher.score(requests, { temperature: 1, topK: 3 });
    expectSameScores(await new VllmTokenScorer(remote()).score(requests, { temperature: 1, topK: 3 }), inProcess);
    expectSameScores(
      await new VllmTokenScorer(remote({ echoWithoutGeneration: true })).score(requests, {
        temperature: 1,
        topK: 3,
      }),
      inProcess,
    );
    expectSameScores(await new SglangTokenScorer(remote()).score(requests, { temperature: 1, topK: 3 }), inProcess);
    const sent = server.requests
      .filter((request) => request.path !== '/v1/chat/completions')
      .map((request) => request.body);
    expect(sent[0]).toMatchObject({
      model: 'teacher',
      prompt: [...requests[0].promptIds, ...requests[0].completionIds],
      max_tokens: 1,
      prompt_logprobs: 3,
    });
    expect(sent.at(-1)).toMatchObject({
      sampling_params: { max_new_tokens: 0 },
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 3,
    });
  });

  it("answers in vLLM's shapes: raw prompt logprobs whatever the temperature, echo without generation, refused limits", async () => {
    const [request] = await scoringRequests();
    const prompt = [...request.promptIds.slice(0, 6)];
    const cold = await postJson(`${server.baseUrl}/completions`, {
      model: 'teacher',
      prompt,
      max_tokens: 1,
      prompt_logprobs: 2,
      temperature: 0.3,
    });
    expect(cold.status).toBe(200);
    const choice = cold.body.choices[0];
    expect(choice.prompt_logprobs).toHaveLength(prompt.length);
    expect(choice.prompt_logprobs[0]).toBeNull();
    expect(choice.prompt_token_ids).toBeNull();
    for (const [position, entries] of (
      choice.prompt_logprobs as Array<Record<string, { logprob: number; rank: number; decoded_token: string }>>
    )
      .slice(1)
      .entries()) {
      const own = entries[String(prompt[position + 1])];
      expect(own).toEqual({ logprob: expect.any(Number), rank: expect.any(Number), decoded_token: expect.any(String) });
      const ranks = Object.values(entries)
        .map((entry) => entry.rank)
        .sort((a, b) => a - b);
      expect(ranks.slice(0, 2)).toEqual([1, 2]);
      expect(Object.keys(entries).length).toBe(own.rank <= 2 ? 2 : 3);
    }
    const warm = await postJson(`${server.baseUrl}/completions`, {
      model: 'teacher',
      prompt,
      max_tokens: 1,
      prompt_logprobs: 2,
      temperature: 1,
    });
    expect(warm.body.choices[0].prompt_logprobs).toEqual(choice.prompt_logprobs);

    const refused = await postJson(`${server.baseUrl}/completions`, {
      model: 'teacher',
      prompt,
      max_tokens: 0,
      prompt_logprobs: 0,
    });
    expect(refused).toMatchObject({ status: 400, body: { message: 'max_tokens must be at least 1, got 0.' } });
    const echoed = await postJson(`${server.baseUrl}/completions`, {
      model: 'teacher',
      prompt,
      max_tokens: 0,
      echo: true,
      prompt_logprobs: 0,
    });
    expect(echoed.body.usage).toEqual({ prompt_tokens: 6, completion_tokens: 0, total_tokens: 6 });
    const tokenizer = await loadChatTokenizer({ modelDir: models.teacherDir });
    expect(echoed.body.choices[0].text).toBe(prompt.map((tokenId) => tokenizer.decode([tokenId])).join(''));
    const tooMany = await postJson(`${server.baseUrl}/completions`, {
      model: 'teacher',
      prompt,
      max_tokens: 1,
      prompt_logprobs: 21,
    });
    expect(tooMany).toMatchObject({
      status: 400,
      body: { message: 'Requested prompt logprobs of 21, which is greater than max allowed: 20' },
    });
  });

  it("answers in SGLang's shape: [logprob, id, text] triples from the first input token, temperature-free", async () => {
    const [request] = await scoringRequests();
    const inputIds = request.promptIds.slice(0, 5);
    const body = (temperature: number) => ({
      input_ids: inputIds,
      sampling_params: { max_new_tokens: 0, temperature },
      return_logprob: true,
      logprob_start_len: 0,
      top_logprobs_num: 2,
      return_text_in_logprobs: true,
    });
    const cold = await postJson(`${server.url}/generate`, body(0.2));
    expect(cold.status).toBe(200);
    const meta = cold.body.meta_info;
    expect(meta.input_token_logprobs).toHaveLength(5);
    expect(meta.input_token_logprobs[0]).toEqual([null, inputIds[0], '<|im_start|>']);
    for (const [position, triple] of (meta.input_token_logprobs as Array<[number, number, string]>)
      .slice(1)
      .entries()) {
      expect(triple).toEqual([expect.any(Number), inputIds[position + 1], expect.any(String)]);
    }
    expect(meta.input_top_logprobs[0]).toBeNull();
    expect(meta.input_top_logprobs[1]).toHaveLength(2);
    expect(meta).toMatchObject({
      prompt_tokens: 5,
      completion_tokens: 0,
      finish_reason: { type: 'length', length: 0 },
    });
    expect(cold.body.output_ids).toEqual([]);
    expect((await postJson(`${server.url}/generate`, body(1))).body.meta_info.input_token_logprobs).toEqual(
      meta.input_token_logprobs,
    );
  });

  it('serves chat completions from the ONNX client with its real token logprobs', async () => {
    const request = {
      messages: [{ role: 'user' as const, content: 'Bonjour' }],
      maxTokens: 8,
      temperature: 0.8,
      seed: 3,
      logprobs: true,
      topLogprobs: 2,
    };
    const local = await new OnnxModelClient({ modelDir: models.teacherDir, intraOpThreads: 1 }).chat(request);
    const client = createModelClient({
      adapter: 'openai',
      baseUrl: server.baseUrl,
      model: 'teacher',
      maxRetries: 0,
      extraBody: { return_tokens_as_token_ids: true },
    });
    const served = await client.chat(request);
    expect(served.message.content).toBe(local.message.content);
    expect(served.logprobs?.map((entry) => entry.tokenId)).toEqual(local.logprobs?.map((entry) => entry.tokenId));
    expect(
      Math.max(...served.logprobs!.map((entry, index) => Math.abs(entry.logprob - local.logprobs![index].logprob))),
    ).toBeLessThan(1e-4);
    expect(served.logprobs?.[0]?.top?.map((entry) => entry.tokenId)).toEqual(
      local.logprobs?.[0]?.top?.map((entry) => entry.tokenId),
    );
  });
});

async function runDistill(teacherConfig: Record<string, unknown>, name: string) {
  const store = new FileArtifactStore(join(root, name));
  const result = await runStageLocally(
    distillStage,
    tinyDistillConfig(models, {
      prompts: [{ kind: 'builtin', limit: 3 }],
      teacher: teacherConfig,
      sampling: { temperature: 1, maxNewTokens: 8 },
      teacherTopK: 2,
      promptsPerPart: 3,
    }),
    {
      store,
      openObject: (uri) => openArtifactObject(uri),
      logger: silentLogger(),
      seed: 'http',
      services: { distillModels: cache },
      clock: { now: () => 0 },
    },
  );
  const records: RolloutRecord[] = [];
  for await (const record of readJsonl<RolloutRecord>(store, 'part-00000.jsonl.gz')) records.push(record);
  const stats = JSON.parse((await store.getBuffer('stats.json')).toString('utf8')) as DistillStats;
  return { output: result.output as DistillOutput, records, stats };
}

describe('distill stage with a server teacher', () => {
  it.each(['vllm', 'sglang'] as const)(
    "gets the in-process teacher's numbers from a %s teacher, whose tokenizer it checks by probe",
    async (adapter) => {
      const local = await runDistill(
        { adapter: 'onnx', modelDir: models.teacherDir, intraOpThreads: 1 },
        `local-${adapter}`,
      );
      const served = await runDistill(
        { adapter, baseUrl: server.baseUrl, model: 'teacher', dummyWeights: true, maxRetries: 0 },
        `served-${adapter}`,
      );
      expect(served.records.map((record) => record.response_ids)).toEqual(
        local.records.map((record) => record.response_ids),
      );
      served.records.forEach((record, index) => {
        const reference = local.records[index];
        expect(
          Math.max(
            ...record.teacher_log_probs.map((value, position) =>
              Math.abs(value - reference.teacher_log_probs[position]),
            ),
          ),
        ).toBeLessThan(1e-4);
        expect(record.teacher_top_ids).toEqual(reference.teacher_top_ids);
        expect(record.teacher_model).toBe('teacher');
      });
      expect(served.stats.models.teacher).toEqual({
        engine: adapter,
        modelId: 'teacher',
        location: `${server.url}${adapter === 'vllm' ? '/v1/completions' : '/generate'}`,
        dummyWeights: true,
        logprobTemperature: 1,
      });
      expect(served.stats.models.tokenizer.verifiedBy).toEqual(['probe']);
      expect(served.stats.models.tokenizer.probedTokens).toBeGreaterThan(30);
      expect(served.stats.global.meanReverseKl).toBeCloseTo(local.stats.global.meanReverseKl, 4);
    },
  );

  it('refuses a server whose tokenizer decodes the probe differently, and a configured fingerprint that differs', async () => {
    const mismatched = runDistill(
      { adapter: 'vllm', baseUrl: mismatchedServer.baseUrl, model: 'mismatched', maxRetries: 0 },
      'mismatched',
    );
    await expect(mismatched).rejects.toMatchObject({ code: 'TOKENIZER_MISMATCH' });
    await expect(mismatched).rejects.toThrow(
      /decodes 2 of \d+ distinct probe token ids differently \(id 101 is "e" for the student but "a" on the server; id 97 is "a" for the student but "e" on the server\)/,
    );
    const configured = runDistill(
      {
        adapter: 'sglang',
        baseUrl: server.baseUrl,
        model: 'teacher',
        maxRetries: 0,
        tokenizerFingerprint: 'f'.repeat(64),
      },
      'configured',
    );
    await expect(configured).rejects.toThrow(
      /tokenizer fingerprint f{64}\) do not share a tokenizer: their fingerprints differ/,
    );
  });
});
