/** @jest-environment ./shared/models/onnx/onnx-jest-environment.js */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HatError } from '../../errors';
import { makeDummyDecoder } from './dummy-decoder';
import { OnnxDecoder } from './onnx-decoder';
import { OnnxGraphBuilder } from './onnx-graph-builder';

let workDirectory: string;
let decoder: OnnxDecoder;
const prompt = [10, 20, 30, 40, 50, 60, 70];

function maxAbsoluteDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let index = 0; index < a.length; index++) worst = Math.max(worst, Math.abs(a[index] - b[index]));
  return worst;
}

beforeAll(async () => {
  workDirectory = mkdtempSync(join(tmpdir(), 'hat-onnx-decoder-'));
  makeDummyDecoder({
    outDir: join(workDirectory, 'model'),
    tokenizer: 'bytes',
    hidden: 32,
    heads: 4,
    kvHeads: 2,
    layers: 2,
    seed: 7,
  });
  decoder = await OnnxDecoder.load(join(workDirectory, 'model'), { intraOpThreads: 1 });
});

afterAll(async () => {
  await decoder?.close();
  rmSync(workDirectory, { recursive: true, force: true });
});

describe('OnnxDecoder', () => {
  it('reports the model shape and that its weights are random', () => {
    expect(decoder.info).toMatchObject({
      layers: 2,
      keyValueHeads: 2,
      headDim: 8,
      vocabularySize: 282,
      dummyWeights: true,
      modelType: 'hat_dummy_decoder',
    });
    expect(decoder.info.eosTokenIds.length).toBeGreaterThan(0);
  });

  it('gives the same logits through the KV cache as one full pass', async () => {
    const sequence = [...prompt, 1, 2, 3, 200, 255, 256, 257];
    const full = await decoder.logits(sequence);
    const stepwise = await decoder.logits(sequence, { chunkTokens: 1 });
    const chunked = await decoder.logits(sequence, { chunkTokens: 4 });
    expect(maxAbsoluteDifference(full, stepwise)).toBeLessThan(1e-4);
    expect(maxAbsoluteDifference(full, chunked)).toBeLessThan(1e-4);
  });

  it('reports for sampled tokens the logprobs that scoring the same tokens gives', async () => {
    const generated = await decoder.generate(prompt, {
      maxNewTokens: 12,
      temperature: 0.7,
      topP: 0.95,
      topK: 50,
      seed: 3,
      topLogprobs: 5,
    });
    expect(generated.logprobTemperature).toBe(0.7);
    expect(generated.tokenIds).toHaveLength(12);
    const scored = await decoder.score(prompt, generated.tokenIds, { temperature: 0.7, topLogprobs: 5 });
    expect(scored.logprobTemperature).toBe(0.7);
    expect(scored.tokens.map((token) => token.tokenId)).toEqual(generated.tokenIds);
    generated.tokens!.forEach((token, index) => {
      const score = scored.tokens[index];
      expect(Math.abs(token.logprob - score.logprob)).toBeLessThan(1e-4);
      expect(Math.abs(token.rawLogprob - score.rawLogprob)).toBeLessThan(1e-4);
      expect(token.top!.map((entry) => entry.tokenId)).toEqual(score.top!.map((entry) => entry.tokenId));
      // Tempered and untempered logprobs really differ at temperature 0.7.
      expect(token.logprob).not.toBeCloseTo(token.rawLogprob, 6);
    });
  });

  it('is deterministic under a seed and varies across seeds', async () => {
    const first = await decoder.generate(prompt, { maxNewTokens: 16, temperature: 1, seed: 'alpha' });
    const again = await decoder.generate(prompt, { maxNewTokens: 16, temperature: 1, seed: 'alpha' });
    const other = await decoder.generate(prompt, { maxNewTokens: 16, temperature: 1, seed: 'beta' });
    expect(again.tokenIds).toEqual(first.tokenIds);
    expect(again.tokens).toEqual(first.tokens);
    expect(other.tokenIds).not.toEqual(first.tokenIds);
    expect(first.sampling).toEqual({ temperature: 1, topP: 1, topK: 0, seed: 'alpha' });
  });

  it('gives each sequence of a left-padded batch what it gets alone', async () => {
    const requests = [
      { promptIds: prompt, seed: 1 },
      { promptIds: [5, 6], seed: 2 },
      { promptIds: [100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110], seed: 3 },
    ];
    const options = { maxNewTokens: 10, temperature: 0.9, topK: 40 };
    const batched = await decoder.generateBatch(requests, options);
    for (const [index, request] of requests.entries()) {
      const alone = await decoder.generate(request.promptIds, { ...options, seed: request.seed });
      expect(batched[index].tokenIds).toEqual(alone.tokenIds);
      expect(
        maxAbsoluteDifference(
          batched[index].tokens!.map((token) => token.logprob),
          alone.tokens!.map((token) => token.logprob),
        ),
      ).toBeLessThan(1e-4);
    }
    const scoredBatch = await decoder.scoreBatch(
      requests.map((request, index) => ({ promptIds: request.promptIds, completionIds: batched[index].tokenIds })),
    );
    for (const [index, request] of requests.entries()) {
      const alone = await decoder.score(request.promptIds, batched[index].tokenIds);
      expect(
        maxAbsoluteDifference(
          scoredBatch[index].tokens.map((token) => token.logprob),
          alone.tokens.map((token) => token.logprob),
        ),
      ).toBeLessThan(1e-4);
    }
  });

  it('stops a batch row at its stop token while the others go on', async () => {
    const options = { maxNewTokens: 8, temperature: 1, seed: 5 };
    const free = await decoder.generate([5, 6], options);
    // The first token that did not occur before it ends the sequence when it is a stop token.
    const stopIndex = free.tokenIds.findIndex(
      (tokenId, index) => index > 0 && !free.tokenIds.slice(0, index).includes(tokenId),
    );
    expect(stopIndex).toBeGreaterThan(0);
    const stopTokenIds = [free.tokenIds[stopIndex]];
    const [stopped, running] = await decoder.generateBatch([{ promptIds: [5, 6] }, { promptIds: prompt, seed: 6 }], {
      ...options,
      stopTokenIds,
    });
    expect(stopped.tokenIds).toEqual(free.tokenIds.slice(0, stopIndex + 1));
    expect(stopped.finishReason).toBe('stop');
    const runningAlone = await decoder.generate(prompt, { ...options, seed: 6, stopTokenIds });
    expect(running.tokenIds).toEqual(runningAlone.tokenIds);
    expect(running.tokenIds.length).toBeGreaterThan(stopIndex + 1);
  });

  it('decodes greedily at temperature 0 and records logprobs at temperature 1', async () => {
    const greedy = await decoder.generate(prompt, { maxNewTokens: 8, temperature: 0, topLogprobs: 3 });
    expect(greedy.logprobTemperature).toBe(1);
    for (const token of greedy.tokens!) {
      expect(token.top![0].tokenId).toBe(token.tokenId);
      expect(token.logprob).toBeCloseTo(token.rawLogprob, 10);
      expect(token.top![0].logprob).toBeGreaterThanOrEqual(token.top![1].logprob);
    }
    // top-k 1 and a tiny nucleus both leave only the most likely token.
    const topKOne = await decoder.generate(prompt, { maxNewTokens: 8, temperature: 1.5, topK: 1, seed: 9 });
    const tinyNucleus = await decoder.generate(prompt, { maxNewTokens: 8, temperature: 1.5, topP: 1e-6, seed: 9 });
    expect(topKOne.tokenIds).toEqual(greedy.tokenIds);
    expect(tinyNucleus.tokenIds).toEqual(greedy.tokenIds);
  });

  it('feeds long prompts in chunks with the same outcome', async () => {
    const small = await OnnxDecoder.load(join(workDirectory, 'model'), { intraOpThreads: 1, maxLogitsFloats: 282 * 3 });
    try {
      const longPrompt = Array.from({ length: 40 }, (_, index) => (index * 37) % 256);
      const chunked = await small.generate(longPrompt, { maxNewTokens: 6, temperature: 0.8, seed: 4 });
      const whole = await decoder.generate(longPrompt, { maxNewTokens: 6, temperature: 0.8, seed: 4 });
      expect(chunked.tokenIds).toEqual(whole.tokenIds);
    } finally {
      await small.close();
    }
  });

  it('computes only the logits it needs with logits_to_keep, giving what a model returning every position gives', async () => {
    // The same weights without the input: the model returns logits for every fed position.
    makeDummyDecoder({
      outDir: join(workDirectory, 'all-positions'),
      tokenizer: 'bytes',
      hidden: 32,
      heads: 4,
      kvHeads: 2,
      layers: 2,
      seed: 7,
      logitsToKeep: false,
    });
    const allPositions = await OnnxDecoder.load(join(workDirectory, 'all-positions'), {
      intraOpThreads: 1,
      maxLogitsFloats: 282 * 5,
    });
    // Chunks of 4 prompt tokens and at most 3 logits rows per call: scored positions span chunks.
    const keeping = await OnnxDecoder.load(join(workDirectory, 'model'), {
      intraOpThreads: 1,
      maxLogitsFloats: 282 * 3,
      maxPrefillChunkTokens: 4,
    });
    try {
      expect(decoder.info.logitsToKeepInput).toBe('logits_to_keep');
      expect(allPositions.info.logitsToKeepInput).toBeUndefined();
      const longPrompt = Array.from({ length: 23 }, (_, index) => (index * 41) % 256);
      const options = { maxNewTokens: 7, temperature: 0.8, seed: 11, topLogprobs: 3 };
      const kept = await keeping.generateBatch([{ promptIds: longPrompt }, { promptIds: prompt, seed: 2 }], options);
      const full = await allPositions.generateBatch(
        [{ promptIds: longPrompt }, { promptIds: prompt, seed: 2 }],
        options,
      );
      for (const [index, result] of kept.entries()) {
        expect(result.tokenIds).toEqual(full[index].tokenIds);
        expect(
          maxAbsoluteDifference(
            result.tokens!.map((token) => token.logprob),
            full[index].tokens!.map((token) => token.logprob),
          ),
        ).toBeLessThan(1e-4);
      }
      const pairs = [
        { promptIds: longPrompt, completionIds: kept[0].tokenIds },
        { promptIds: [5, 6], completionIds: [7, 8, 9, 10, 11, 12, 13, 14, 15] },
      ];
      const scoredKept = await keeping.scoreBatch(pairs, { topLogprobs: 2 });
      const scoredFull = await allPositions.scoreBatch(pairs, { topLogprobs: 2 });
      for (const [index, pair] of pairs.entries()) {
        expect(scoredKept[index].tokens.map((token) => token.tokenId)).toEqual(pair.completionIds);
        expect(
          maxAbsoluteDifference(
            scoredKept[index].tokens.map((token) => token.logprob),
            scoredFull[index].tokens.map((token) => token.logprob),
          ),
        ).toBeLessThan(1e-4);
      }
      // Every position's logits are still there for whoever asks for them.
      expect(
        maxAbsoluteDifference(await keeping.logits(longPrompt), await allPositions.logits(longPrompt)),
      ).toBeLessThan(1e-4);
    } finally {
      await Promise.all([allPositions.close(), keeping.close()]);
    }
  });

  it('resumes a prompt that extends a kept one from its cache, with the same tokens and logprobs as a fresh prefill', async () => {
    const reusing = await OnnxDecoder.load(join(workDirectory, 'model'), {
      intraOpThreads: 1,
      maxPrefillChunkTokens: 16,
    });
    const fresh = await OnnxDecoder.load(join(workDirectory, 'model'), {
      intraOpThreads: 1,
      maxPrefillChunkTokens: 16,
      prefixCacheEntries: 0,
    });
    try {
      const context = Array.from({ length: 60 }, (_, index) => (index * 29 + 3) % 256);
      const options = { maxNewTokens: 6, temperature: 0.9, seed: 'agent', topLogprobs: 2 };
      await reusing.generate(context, options);
      // The next call of an agent: the previous context, its answer and a tool result.
      const next = [...context, 7, 8, 9, 10, 11, 12, 13];
      const resumed = await reusing.generate(next, options);
      expect(reusing.prefixStats).toEqual({ reusedTokens: 60, fedTokens: 60 + 7 });
      const whole = await fresh.generate(next, options);
      expect(resumed.tokenIds).toEqual(whole.tokenIds);
      expect(
        maxAbsoluteDifference(
          resumed.tokens!.map((token) => token.logprob),
          whole.tokens!.map((token) => token.logprob),
        ),
      ).toBeLessThan(1e-4);
      // A prompt that diverges early shares too little to reuse: fed whole.
      await reusing.generate([1, 2, 3, ...context], options);
      expect(reusing.prefixStats.reusedTokens).toBe(60);
      expect(fresh.prefixStats).toEqual({ reusedTokens: 0, fedTokens: 0 });
    } finally {
      await Promise.all([reusing.close(), fresh.close()]);
    }
  });

  it('refuses token ids outside the vocabulary and empty prompts', async () => {
    await expect(decoder.generate([1, 99999])).rejects.toThrow(
      /\[ONNX_BAD_TOKENS\] requests\[0\]\.promptIds holds token id 99999/,
    );
    await expect(decoder.score([], [1])).rejects.toThrow(/\[ONNX_BAD_TOKENS\] requests\[0\]\.promptIds is empty/);
    await expect(decoder.generate(prompt, { topP: 0 })).rejects.toThrow(/\[ONNX_BAD_SAMPLING\] topP/);
  });

  it('names the missing input when a model does not follow the Optimum naming', async () => {
    // A model with input_ids and attention_mask but no position_ids and no KV cache.
    const directory = join(workDirectory, 'broken');
    const graph = new OnnxGraphBuilder('broken');
    const inputIds = graph.input('input_ids', 'int64', ['batch', 'sequence']);
    graph.input('attention_mask', 'int64', ['batch', 'sequence']);
    const embedding = graph.floatConstant('embedding', [4, 3], new Float32Array(12).fill(0.5));
    graph.output(graph.op('Gather', [embedding, inputIds], { axis: 0 }), 'logits', 'float', ['batch', 'sequence', 3]);
    mkdirSync(directory, { recursive: true });
    writeFileSync(
      join(directory, 'model.onnx'),
      Buffer.concat(graph.encode({ opsetVersion: 17, producerName: 'test', producerVersion: '0' })),
    );
    writeFileSync(
      join(directory, 'config.json'),
      JSON.stringify({ num_hidden_layers: 1, num_attention_heads: 1, hidden_size: 3, vocab_size: 3 }),
    );
    const failure = await OnnxDecoder.load(directory).catch((error: unknown) => error);
    expect(HatError.isInstance(failure) && failure.exitCode).toBe(2);
    expect((failure as Error).message).toMatch(
      /^\[ONNX_MODEL_MISMATCH\] .*model\.onnx has no input "position_ids"; has no input "past_key_values\.0\.key"/,
    );
    expect((failure as Error).message).toContain('expected Optimum decoder naming');
  });

  it('says which file is missing from a model directory', async () => {
    await expect(OnnxDecoder.load(join(workDirectory, 'nowhere'))).rejects.toThrow(
      /\[ONNX_MODEL_MISSING\] .*nowhere has no model\.onnx/,
    );
  });
});
