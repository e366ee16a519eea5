/**
 * `hat serve` throughput against the in-process ONNX path, same model, prompts and seeds, in the
 * same process and run.
 *
 *   node dist/bench/serve.bench.js [--model <dir>] [--tokens 64] [--prompt-tokens 64] [--concurrency 4] [--threads 1] [--repeats 3]
 *
 * Without --model it writes a random-weight dummy decoder for the Qwen3 vocabulary (151,669
 * tokens, hidden 64) to a temporary directory. Prints generated tokens/s of
 *  - one request at a time: in-process `OnnxModelClient.generate` vs `/v1/completions` over HTTP
 *    (token-id prompt, sampled-token logprobs, `return_tokens_as_token_ids`: what the token-exact
 *    samplers send); their ratio is the serving overhead (HTTP, JSON, detokenizing);
 *  - --concurrency requests at once: in-process one after another (the client runs calls one at
 *    a time) vs served together (batched by the server).
 * It also checks that both paths sampled the same ids. Figures are medians over --repeats runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { startServeServer } from '../serve/serve-server';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

interface BenchOptions {
  model?: string;
  tokens: number;
  promptTokens: number;
  concurrency: number;
  threads: number;
  repeats: number;
}

function parseArguments(argv: string[]): BenchOptions {
  const value = (flag: string): string | undefined => {
    const index = argv.indexOf(flag);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  return {
    model: value('--model'),
    tokens: Number(value('--tokens') ?? 64),
    promptTokens: Number(value('--prompt-tokens') ?? 64),
    concurrency: Number(value('--concurrency') ?? 4),
    threads: Number(value('--threads') ?? 1),
    repeats: Number(value('--repeats') ?? 3),
  };
}

async function main(): Promise<void> {
  checkBenchFlags(
    'node dist/bench/serve.bench.js [--model <dir>] [--tokens 64] [--prompt-tokens 64] [--concurrency 4] [--threads 1] [--repeats 3]',
  );
  const options = parseArguments(process.argv.slice(2));
  const temporary = options.model ? undefined : mkdtempSync(join(tmpdir(), 'hat-serve-bench-'));
  const modelDir =
    options.model ??
    makeDummyDecoder({ outDir: join(temporary!, 'model'), tokenizer: 'qwen3', seed: 'serve-bench' }).outDir;
  const inProcess = new OnnxModelClient({ modelDir, intraOpThreads: options.threads });
  const server = await startServeServer({
    model: modelDir,
    intraOpThreads: options.threads,
    maxBatchSize: options.concurrency,
  });
  try {
    const vocabularySize = (await inProcess.info()).vocabularySize;
    const prompts = Array.from({ length: options.concurrency }, (_, row) =>
      Array.from({ length: options.promptTokens }, (_, index) => (index * 7919 + row * 104729 + 13) % vocabularySize),
    );
    const sampling = { temperature: 1, topP: 1, topK: 0 };
    // Random weights rarely sample eos; ignore_eos keeps every sequence at full length on both sides.
    const local = async (promptIds: number[], seed: number): Promise<number[]> =>
      (
        await inProcess.generate(promptIds, {
          maxNewTokens: options.tokens,
          ...sampling,
          seed,
          logprobs: true,
          stopTokenIds: [],
        })
      ).tokenIds;
    const served = async (promptIds: number[], seed: number): Promise<number[]> => {
      const response = await fetch(`${server.baseUrl}/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          prompt: promptIds,
          max_tokens: options.tokens,
          temperature: 1,
          seed,
          logprobs: 1,
          return_tokens_as_token_ids: true,
          ignore_eos: true,
        }),
      });
      const body = (await response.json()) as { choices: Array<{ logprobs: { tokens: string[] } }> };
      return body.choices[0].logprobs.tokens.map((token) => Number(token.slice('token_id:'.length)));
    };
    await local(prompts[0], 0);
    await served(prompts[0], 0);

    const single = { local: [] as number[], served: [] as number[] };
    const many = { local: [] as number[], served: [] as number[] };
    let mismatches = 0;
    for (let repeat = 0; repeat < options.repeats; repeat++) {
      let started = performance.now();
      const localIds = await local(prompts[0], repeat);
      single.local.push(localIds.length / ((performance.now() - started) / 1000));
      started = performance.now();
      const servedIds = await served(prompts[0], repeat);
      single.served.push(servedIds.length / ((performance.now() - started) / 1000));
      if (JSON.stringify(localIds) !== JSON.stringify(servedIds)) mismatches++;

      started = performance.now();
      let total = 0;
      for (const [row, prompt] of prompts.entries()) total += (await local(prompt, repeat * 100 + row)).length;
      many.local.push(total / ((performance.now() - started) / 1000));
      started = performance.now();
      const together = await Promise.all(prompts.map((prompt, row) => served(prompt, repeat * 100 + row)));
      many.served.push(together.reduce((sum, ids) => sum + ids.length, 0) / ((performance.now() - started) / 1000));
    }
    const singleRatio = median(single.served) / median(single.local);
    const manyRatio = median(many.served) / median(many.local);
    console.log(
      `model: ${modelDir} (vocabulary ${vocabularySize}), ${options.promptTokens} prompt tokens, ${options.tokens} new tokens, ${options.threads} thread(s), ${options.repeats} repeats`,
    );
    console.log(
      `one request:  in-process ${median(single.local).toFixed(1)} tok/s, served ${median(single.served).toFixed(1)} tok/s, ratio ${singleRatio.toFixed(3)}`,
    );
    console.log(
      `${options.concurrency} at once:    in-process (one after another) ${median(many.local).toFixed(1)} tok/s, served (batched) ${median(many.served).toFixed(1)} tok/s, ratio ${manyRatio.toFixed(3)}`,
    );
    console.log(
      `same ids served and in-process: ${mismatches === 0 ? 'yes' : `NO (${mismatches} of ${options.repeats} differ)`}`,
    );
    console.log(
      JSON.stringify({
        singleTokensPerSecond: { inProcess: median(single.local), served: median(single.served), ratio: singleRatio },
        concurrent: {
          concurrency: options.concurrency,
          inProcess: median(many.local),
          served: median(many.served),
          ratio: manyRatio,
        },
        mismatches,
      }),
    );
  } finally {
    await server.close();
    await inProcess.close();
    if (temporary) rmSync(temporary, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
