/**
 * Token-exact served sampling, two figures, each against a baseline measured in the same run:
 *   1. client overhead: the same `/v1/completions` request (token-id prompt, logprobs, ids as
 *      `token_id:<id>`) to `hat serve` sent by a bare `fetch` loop that only parses the JSON, and
 *      by ServedTokenSampler (body building, endpoint limiter, retry wrapper, response checks);
 *      ratio = bare seconds / client seconds (goal >= 0.9);
 *   2. rollout tokens per second: the same sampling requests (seeded, temperature 1) through
 *      `hat serve` and through the in-process decoder of the same model directory.
 * `hat serve` runs in this process (startServeServer), over a random-weight decoder with the byte
 * tokenizer; rounds alternate the two sides. Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/served-sampling.bench.js [--calls 200] [--rounds 3]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { OnnxTokenScorer } from '../shared/models/scoring/onnx-token-scorer';
import { startServeServer } from '../serve/serve-server';
import { InProcessTokenSampler } from '../shared/models/token-exact/in-process-token-sampler';
import { createTokenSampler } from '../shared/models/model-registry';
import { vllmSamplingRequest } from '../shared/models/token-exact/served-token-sampler';
import { stopTokenIdsOf } from '../shared/models/token-exact/token-exact-episode';
import type { SampleRequest, TokenSampler } from '../shared/models/token-exact/token-sampler';
import { loadChatTokenizer } from '../shared/text/load-chat-tokenizer';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
}

async function timed(work: () => Promise<number>): Promise<{ seconds: number; tokens: number }> {
  const started = performance.now();
  const tokens = await work();
  return { seconds: (performance.now() - started) / 1000, tokens };
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/served-sampling.bench.js [--calls 200] [--rounds 3]');
  const calls = option('calls', 200);
  const rounds = option('rounds', 3);
  const directory = mkdtempSync(join(tmpdir(), 'hat-served-bench-'));
  const modelDir = join(directory, 'policy');
  makeDummyDecoder({ outDir: modelDir, tokenizer: 'bytes', layers: 2, hidden: 32, seed: 'bench' });
  const tokenizer = await loadChatTokenizer({ modelDir });
  const serve = await startServeServer({ model: modelDir, servedModelName: 'policy', intraOpThreads: 1 });
  const model = new OnnxTokenScorer(new OnnxModelClient({ modelDir, intraOpThreads: 1 }), { modelDir });
  try {
    const promptIds = tokenizer.encode(
      tokenizer.render([{ role: 'user', content: 'Is the blue mug in stock, and how much is it with the coupon?' }], {
        addGenerationPrompt: true,
      }),
    );
    const stopTokenIds = stopTokenIdsOf(tokenizer);
    const served = createTokenSampler({ adapter: 'vllm', baseUrl: serve.baseUrl, model: 'policy', concurrency: 1 });
    const local = new InProcessTokenSampler(model, 'raw_logprobs');
    const request = (index: number, maxTokens: number): SampleRequest => ({
      promptIds,
      sampling: { temperature: 1, topP: 1, topK: 0 },
      maxTokens,
      seed: index,
      stopTokenIds,
    });

    // 1. Client overhead: short completions (4 tokens), so the client's share is as large as it gets.
    const bare = async (): Promise<number> => {
      let tokens = 0;
      for (let index = 0; index < calls; index++) {
        const response = await fetch(`${serve.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(vllmSamplingRequest('policy', request(index, 4))),
        });
        const body = (await response.json()) as { choices: Array<{ logprobs: { tokens: string[] } }> };
        tokens += body.choices[0].logprobs.tokens.length;
      }
      return tokens;
    };
    const viaClient = (sampler: TokenSampler, maxTokens: number, count: number) => async (): Promise<number> => {
      let tokens = 0;
      for (let index = 0; index < count; index++)
        tokens += (await sampler.sample(request(index, maxTokens))).tokenIds.length;
      return tokens;
    };
    await bare();
    await viaClient(served, 4, calls)();
    const ratios: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const baseline = await timed(bare);
      const client = await timed(viaClient(served, 4, calls));
      ratios.push(baseline.seconds / client.seconds);
      console.log(
        `round ${round + 1}: bare fetch ${(calls / baseline.seconds).toFixed(1)} calls/s, ServedTokenSampler ${(calls / client.seconds).toFixed(1)} calls/s, ratio ${(baseline.seconds / client.seconds).toFixed(3)}`,
      );
    }
    console.log(
      `client overhead: ratio bare/client median ${ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)].toFixed(3)} (goal >= 0.9) over ${calls} calls x ${rounds} rounds`,
    );

    // 2. Rollout tokens per second: 32-token samples, served vs in-process, same seeds.
    const rollouts = Math.max(8, Math.floor(calls / 8));
    const rates: Array<{ served: number; local: number }> = [];
    for (let round = 0; round < rounds; round++) {
      const overHttp = await timed(viaClient(served, 32, rollouts));
      const inProcess = await timed(viaClient(local, 32, rollouts));
      rates.push({ served: overHttp.tokens / overHttp.seconds, local: inProcess.tokens / inProcess.seconds });
      console.log(
        `round ${round + 1}: served ${(overHttp.tokens / overHttp.seconds).toFixed(1)} tokens/s, in-process ${(inProcess.tokens / inProcess.seconds).toFixed(1)} tokens/s`,
      );
    }
    const ratio = rates.map((rate) => rate.served / rate.local).sort((a, b) => a - b);
    console.log(
      `rollout tokens/s served / in-process: median ${ratio[Math.floor(ratio.length / 2)].toFixed(3)} over ${rollouts} samples x ${rounds} rounds`,
    );
  } finally {
    await serve.close();
    await model.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
