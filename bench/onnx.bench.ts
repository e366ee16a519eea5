/**
 * ONNX backend throughput against a bare onnxruntime loop, in the same process and run.
 *
 *   node dist/bench/onnx.bench.js [--model <dir>] [--tokens 128] [--prompt-tokens 64] [--threads 1] [--repeats 5]
 *
 * Without --model it writes a random-weight dummy decoder for the Qwen3 vocabulary (151,669
 * tokens, hidden 64) to a temporary directory. Prints tokens/s of greedy generation for both
 * (same model, prompt and token count, both with a KV cache), their ratio (goal >= 0.9), our
 * sampling and logprob costs, and scoring throughput. Figures are medians over --repeats runs.
 * Then the prefill of a long prompt (--long-prompt-tokens, 5,000: a recorded agent context) by
 * the same weights with and without `logits_to_keep`, the latter standing for an export that
 * returns logits for every position (dummy model only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { OnnxDecoder } from '../shared/models/onnx/onnx-decoder';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

interface BenchOptions {
  model?: string;
  tokens: number;
  promptTokens: number;
  threads: number;
  repeats: number;
  longPromptTokens: number;
}

function parseArguments(argv: string[]): BenchOptions {
  const value = (flag: string): string | undefined => {
    const index = argv.indexOf(flag);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  return {
    model: value('--model'),
    tokens: Number(value('--tokens') ?? 128),
    promptTokens: Number(value('--prompt-tokens') ?? 64),
    threads: Number(value('--threads') ?? 1),
    repeats: Number(value('--repeats') ?? 5),
    longPromptTokens: Number(value('--long-prompt-tokens') ?? 5000),
  };
}

/**
 * The reference: the smallest greedy loop onnxruntime allows. Prefill, argmax, then one token per
 * run with `present.*` fed back as `past_key_values.*`; nothing else.
 */
async function bareGreedyLoop(
  session: ort.InferenceSession,
  shape: { layers: number; kvHeads: number; headDim: number; vocabularySize: number; logitsToKeepInput?: string },
  promptIds: number[],
  tokens: number,
): Promise<number[]> {
  let past: Record<string, ort.Tensor> = {};
  for (let layer = 0; layer < shape.layers; layer++) {
    for (const part of ['key', 'value'])
      past[`past_key_values.${layer}.${part}`] = new ort.Tensor('float32', new Float32Array(0), [
        1,
        shape.kvHeads,
        0,
        shape.headDim,
      ]);
  }
  let inputIds = BigInt64Array.from(promptIds.map(BigInt));
  let positionIds = BigInt64Array.from(promptIds.map((_, index) => BigInt(index)));
  let total = promptIds.length;
  const generated: number[] = [];
  while (generated.length < tokens) {
    const outputs = await session.run({
      input_ids: new ort.Tensor('int64', inputIds, [1, inputIds.length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]),
      position_ids: new ort.Tensor('int64', positionIds, [1, positionIds.length]),
      ...(shape.logitsToKeepInput
        ? { [shape.logitsToKeepInput]: new ort.Tensor('int64', BigInt64Array.of(1n), []) }
        : {}),
      ...past,
    });
    const logits = outputs.logits.data as Float32Array;
    const offset = logits.length - shape.vocabularySize;
    let best = 0;
    for (let tokenId = 1; tokenId < shape.vocabularySize; tokenId++)
      if (logits[offset + tokenId] > logits[offset + best]) best = tokenId;
    generated.push(best);
    past = {};
    for (let layer = 0; layer < shape.layers; layer++) {
      past[`past_key_values.${layer}.key`] = outputs[`present.${layer}.key`];
      past[`past_key_values.${layer}.value`] = outputs[`present.${layer}.value`];
    }
    inputIds = BigInt64Array.of(BigInt(best));
    positionIds = BigInt64Array.of(BigInt(total));
    total += 1;
  }
  return generated;
}

async function timed<T>(work: () => Promise<T>): Promise<{ result: T; seconds: number }> {
  const started = performance.now();
  const result = await work();
  return { result, seconds: (performance.now() - started) / 1000 };
}

/** Prefill of a long prompt (one new token) with logits_to_keep and by the same weights returning every position. */
async function longPrefill(decoder: OnnxDecoder, allPositionsDir: string, options: BenchOptions): Promise<string[]> {
  makeDummyDecoder({ outDir: allPositionsDir, tokenizer: 'qwen3', seed: 'bench', logitsToKeep: false });
  const allPositions = await OnnxDecoder.load(allPositionsDir, { intraOpThreads: options.threads });
  try {
    const promptIds = Array.from({ length: options.longPromptTokens }, (_, index) => (index * 7919 + 13) % 150000);
    const once = { maxNewTokens: 1, temperature: 0, logprobs: false, stopTokenIds: [] as number[] };
    await decoder.generate(promptIds, once);
    await allPositions.generate(promptIds, once);
    const kept: number[] = [];
    const all: number[] = [];
    const repeats = Math.max(1, Math.min(options.repeats, 3));
    for (let repeat = 0; repeat < repeats; repeat++) {
      kept.push((await timed(() => decoder.generate(promptIds, once))).seconds);
      all.push((await timed(() => allPositions.generate(promptIds, once))).seconds);
    }
    const floats = (options.longPromptTokens * decoder.info.vocabularySize) / 1e6;
    return [
      `prefill of ${options.longPromptTokens} tokens + 1 new token, median of ${repeats}`,
      `  logits of the last position only (logits_to_keep)   ${(median(kept) * 1000).toFixed(0)} ms`,
      `  logits of every position (export without it)        ${(median(all) * 1000).toFixed(0)} ms   ${(median(all) / median(kept)).toFixed(1)}x (${floats.toFixed(0)} M floats)`,
    ];
  } finally {
    await allPositions.close();
  }
}

async function main(): Promise<void> {
  checkBenchFlags(
    'node dist/bench/onnx.bench.js [--model <dir>] [--tokens 128] [--prompt-tokens 64] [--long-prompt-tokens 5000] [--threads 1] [--repeats 5]',
  );
  const options = parseArguments(process.argv.slice(2));
  const temporary = options.model ? undefined : mkdtempSync(join(tmpdir(), 'hat-onnx-bench-'));
  const modelDir = options.model ?? join(temporary as string, 'dummy-qwen3');
  try {
    if (temporary) makeDummyDecoder({ outDir: modelDir, tokenizer: 'qwen3', seed: 'bench' });
    const decoder = await OnnxDecoder.load(modelDir, { intraOpThreads: options.threads });
    const info = decoder.info;
    const session = await ort.InferenceSession.create(info.modelFile, {
      intraOpNumThreads: options.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
    const shape = {
      layers: info.layers,
      kvHeads: info.keyValueHeads,
      headDim: info.headDim,
      vocabularySize: info.vocabularySize,
      logitsToKeepInput: info.logitsToKeepInput,
    };
    const promptIds = Array.from(
      { length: options.promptTokens },
      (_, index) => (index * 7919 + 13) % Math.min(info.vocabularySize, 150000),
    );
    const greedy = { maxNewTokens: options.tokens, temperature: 0, stopTokenIds: [] as number[] };

    // Warm-up (first runs allocate and plan), and a check that both loops decode the same tokens.
    const reference = await bareGreedyLoop(session, shape, promptIds, options.tokens);
    const ours = await decoder.generate(promptIds, { ...greedy, logprobs: false });
    const sameTokens = reference.every((tokenId, index) => tokenId === ours.tokenIds[index]);

    const bareSeconds: number[] = [];
    const oursSeconds: number[] = [];
    const oursLogprobSeconds: number[] = [];
    const oursSampledSeconds: number[] = [];
    for (let repeat = 0; repeat < options.repeats; repeat++) {
      // Interleaved so drift in machine load hits both sides alike.
      bareSeconds.push((await timed(() => bareGreedyLoop(session, shape, promptIds, options.tokens))).seconds);
      oursSeconds.push((await timed(() => decoder.generate(promptIds, { ...greedy, logprobs: false }))).seconds);
      oursLogprobSeconds.push((await timed(() => decoder.generate(promptIds, { ...greedy, logprobs: true }))).seconds);
      oursSampledSeconds.push(
        (
          await timed(() =>
            decoder.generate(promptIds, {
              maxNewTokens: options.tokens,
              temperature: 0.8,
              topP: 0.95,
              seed: repeat,
              stopTokenIds: [],
            }),
          )
        ).seconds,
      );
    }

    const completionIds = ours.tokenIds;
    const scoreSeconds: number[] = [];
    const batchScoreSeconds: number[] = [];
    const batch = Array.from({ length: 8 }, (_, index) => ({ promptIds: promptIds.slice(index), completionIds }));
    await decoder.score(promptIds, completionIds);
    for (let repeat = 0; repeat < options.repeats; repeat++) {
      scoreSeconds.push((await timed(() => decoder.score(promptIds, completionIds))).seconds);
      batchScoreSeconds.push((await timed(() => decoder.scoreBatch(batch, { topLogprobs: 5 }))).seconds);
    }

    const rate = (tokens: number, seconds: number[]): number => tokens / median(seconds);
    const bareRate = rate(options.tokens, bareSeconds);
    const oursRate = rate(options.tokens, oursSeconds);
    const lines = [
      `ONNX backend benchmark: ${info.dummyWeights ? 'dummy decoder (random weights)' : info.modelType}, ${info.layers} layers, vocab ${info.vocabularySize}, threads ${options.threads}`,
      `prompt ${options.promptTokens} tokens, ${options.tokens} new tokens, median of ${options.repeats} runs`,
      `  bare onnxruntime greedy loop     ${bareRate.toFixed(1)} tokens/s`,
      `  OnnxDecoder greedy               ${oursRate.toFixed(1)} tokens/s   ratio ${(oursRate / bareRate).toFixed(3)} (goal >= 0.9: ${oursRate / bareRate >= 0.9 ? 'met' : 'NOT met'})`,
      `  OnnxDecoder greedy + logprobs    ${rate(options.tokens, oursLogprobSeconds).toFixed(1)} tokens/s   ratio ${(rate(options.tokens, oursLogprobSeconds) / bareRate).toFixed(3)}`,
      `  OnnxDecoder T=0.8 top-p 0.95     ${rate(options.tokens, oursSampledSeconds).toFixed(1)} tokens/s   ratio ${(rate(options.tokens, oursSampledSeconds) / bareRate).toFixed(3)} (with logprobs)`,
      `  same greedy tokens as bare loop: ${sameTokens ? 'yes' : 'NO'}`,
      `  scoring, 1 x (${options.promptTokens}+${completionIds.length})         ${rate(completionIds.length, scoreSeconds).toFixed(1)} scored tokens/s (${rate(options.promptTokens + completionIds.length, scoreSeconds).toFixed(1)} fed tokens/s)`,
      `  scoring, batch of 8, top-5        ${rate(completionIds.length * 8, batchScoreSeconds).toFixed(1)} scored tokens/s`,
    ];
    if (temporary) lines.push(...(await longPrefill(decoder, join(temporary, 'dummy-qwen3-all-positions'), options)));
    process.stdout.write(`${lines.join('\n')}\n`);
    await session.release();
    await decoder.close();
    if (!sameTokens) process.exitCode = 1;
  } finally {
    if (temporary) rmSync(temporary, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`onnx bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
