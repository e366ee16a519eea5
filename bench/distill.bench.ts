/**
 * Distillation costs on one CPU process: student sampling, in-process teacher scoring, and
 * teacher scoring over HTTP (vLLM `prompt_logprobs` and SGLang `/generate` shapes, served by the
 * local test server backed by the same ONNX teacher).
 *
 *   node dist/bench/distill.bench.js [--tokenizer qwen3] [--sequences 8] [--prompt-tokens 48] [--tokens 32] [--repeats 3]
 *
 * Writes a random-weight student (hidden 64, 2 layers) and teacher (hidden 128, 4 layers) for the
 * tokenizer into a temporary directory. Prints response tokens/s of each path (medians over
 * --repeats) and the ratios: scoring/sampling (how much of a rollout the teacher costs) and
 * HTTP/in-process (what the server round trip adds; the test server also computes vLLM's ranks
 * with a second pass, so this is an upper bound on protocol overhead, not a vLLM figure).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { makeDummyDecoder } from '../shared/models/onnx/dummy-decoder';
import { OnnxModelClient } from '../shared/models/onnx/onnx-model-client';
import { OnnxTokenScorer } from '../shared/models/scoring/onnx-token-scorer';
import { remoteScorerConfigSchema } from '../shared/models/scoring/scoring-endpoint';
import { SglangTokenScorer } from '../shared/models/scoring/sglang-generate-logprobs';
import type { TokenScoreRequest, TokenScorer } from '../shared/models/scoring/token-scorer';
import { VllmTokenScorer } from '../shared/models/scoring/vllm-prompt-logprobs';
import { createOnnxPromptScorer } from '../shared/models/testing/onnx-prompt-scorer';
import { OpenAiTestServer } from '../shared/models/testing/openai-test-server';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

function option(argv: string[], flag: string, fallback: string): string {
  const index = argv.indexOf(flag);
  return index >= 0 && argv[index + 1] !== undefined ? argv[index + 1] : fallback;
}

async function timed(repeats: number, work: () => Promise<unknown>): Promise<number> {
  const durations: number[] = [];
  for (let repeat = 0; repeat < repeats; repeat++) {
    const started = performance.now();
    await work();
    durations.push(performance.now() - started);
  }
  return median(durations) / 1000;
}

async function main(): Promise<void> {
  checkBenchFlags(
    'node dist/bench/distill.bench.js [--tokenizer qwen3] [--sequences 8] [--prompt-tokens 48] [--tokens 32] [--repeats 3]',
  );
  const argv = process.argv.slice(2);
  const tokenizer = option(argv, '--tokenizer', 'qwen3');
  const sequences = Number(option(argv, '--sequences', '8'));
  const promptTokens = Number(option(argv, '--prompt-tokens', '48'));
  const tokens = Number(option(argv, '--tokens', '32'));
  const repeats = Number(option(argv, '--repeats', '3'));
  const directory = mkdtempSync(join(tmpdir(), 'hat-distill-bench-'));
  let server: OpenAiTestServer | undefined;
  const closers: Array<() => Promise<void>> = [];
  try {
    const studentDir = join(directory, 'student');
    const teacherDir = join(directory, 'teacher');
    makeDummyDecoder({ outDir: studentDir, tokenizer, layers: 2, hidden: 64, seed: 'bench-student' });
    makeDummyDecoder({
      outDir: teacherDir,
      tokenizer,
      layers: 4,
      hidden: 128,
      heads: 8,
      kvHeads: 4,
      seed: 'bench-teacher',
    });
    const student = new OnnxTokenScorer(new OnnxModelClient({ modelDir: studentDir }), { modelDir: studentDir });
    const teacher = new OnnxTokenScorer(new OnnxModelClient({ modelDir: teacherDir }), { modelDir: teacherDir });
    const served = new OnnxTokenScorer(new OnnxModelClient({ modelDir: teacherDir }), { modelDir: teacherDir });
    closers.push(
      () => student.close(),
      () => teacher.close(),
      () => served.close(),
    );
    server = await OpenAiTestServer.start({
      models: ['teacher'],
      scorer: await createOnnxPromptScorer(served, teacherDir),
    });
    const remote = () => remoteScorerConfigSchema.parse({ baseUrl: server!.baseUrl, model: 'teacher', maxRetries: 0 });

    const promptIds = Array.from({ length: promptTokens }, (_, index) => 1000 + ((index * 7919) % 5000));
    const rows = Array.from({ length: sequences }, (_, index) => ({ promptIds, seed: `bench/${index}` }));
    let requests: TokenScoreRequest[] = [];
    const samplingSeconds = await timed(repeats, async () => {
      const results = await student.exclusive((decoder) =>
        decoder.generateBatch(rows, { maxNewTokens: tokens, temperature: 1, stopTokenIds: [], logprobs: true }),
      );
      requests = results.map((result) => ({ promptIds, completionIds: result.tokenIds }));
    });
    const responseTokens = sequences * tokens;
    const scoring = async (scorer: TokenScorer) =>
      timed(repeats, () => scorer.score(requests, { temperature: 1, topK: 4 }));
    const inProcessSeconds = await scoring(teacher);
    const vllmSeconds = await scoring(new VllmTokenScorer(remote()));
    const sglangSeconds = await scoring(new SglangTokenScorer(remote()));
    const rate = (seconds: number) => (responseTokens / seconds).toFixed(0);
    console.log(
      `distill bench: tokenizer ${tokenizer}, ${sequences} sequences × (${promptTokens} prompt + ${tokens} response tokens), medians of ${repeats}`,
    );
    console.log(`  student sampling (batch 8, logprobs):  ${rate(samplingSeconds)} response tokens/s`);
    console.log(`  teacher scoring in-process (top-4):    ${rate(inProcessSeconds)} response tokens/s`);
    console.log(`  teacher scoring via vLLM shape (HTTP): ${rate(vllmSeconds)} response tokens/s`);
    console.log(`  teacher scoring via SGLang shape:      ${rate(sglangSeconds)} response tokens/s`);
    console.log(`  ratio scoring/sampling time (in-process): ${(inProcessSeconds / samplingSeconds).toFixed(2)}`);
    console.log(
      `  ratio HTTP/in-process scoring time: vLLM ${(vllmSeconds / inProcessSeconds).toFixed(2)}, SGLang ${(sglangSeconds / inProcessSeconds).toFixed(2)}`,
    );
  } finally {
    await server?.close();
    for (const close of closers) await close();
    rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
