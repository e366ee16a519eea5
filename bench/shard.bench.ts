/**
 * The shard stage end to end against the tokenizer alone. Trajectories come from the simulator
 * (scripted expert over generated live-room tasks, the sample harness), stored as gzip JSONL.
 * Measured in the same process, on the same conversations:
 * - raw: the tokenizer's own `encode` of the already-rendered text (qwen3 template, the stage's
 *   render date), nothing else;
 * - stage: `hat stage shard`'s code path (plan, parts, fan-in) from the JSONL input to every
 *   output: read and validate records, dedup keys, render, span location, loss masks, segmented
 *   encoding, packing, Parquet shards, three JSONL exports, verl Parquet, card, manifest.
 * - tokenize: the stage's per-sample work alone (tokenizeConversation: render, span location,
 *   segmented encoding with each distinct segment encoded once, loss mask, the per-sample
 *   boundary and decode verification) against raw encode, each on its own set of conversations
 *   neither has seen, in alternating rounds, per CPU second (goal >= 3x raw: the rendered system
 *   prompt and tool block repeat across samples; tool results and room context do not).
 * Prints tokens/s of both and stage/raw (goal >= 0.7), then packing fill at the sequence length
 * (goal >= 97% non-padding) with the best fill any whole-sample packing can reach on these
 * lengths, and fill at longer sequence lengths. Raw encode is measured warm, before and after
 * the stage, and averaged, because the machine may be shared; throughput per CPU second is
 * printed too, steadier under load. Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/shard.bench.js [--episodes 400] [--sequence-length 8192] [--rounds 5]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { createStoreCache } from '../queues/bullmq/stage-runtime';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { loadHarness } from '../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { createLogger } from '../shared/log/logger';
import { Rng } from '../shared/random/rng';
import { runEpisode } from '../shared/simulator/agent-loop';
import { ScriptedExpert } from '../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { loadChatTokenizer, loadStockTokenizer, presetDirectory } from '../shared/text/load-chat-tokenizer';
import { trajectoryToTemplateInput } from '../shared/text/template-input';
import { tokenizeConversation } from '../shared/text/tokenize-conversation';
import type { Trajectory } from '../shared/trajectory/trajectory';
import { fillUpperBound, packBestFitDecreasing } from '../workers/shard/pack-sequences';
import { shardStage } from '../workers/shard/processor';
import type { ShardOutput } from '../workers/shard/shard-contract';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
}

const episodes = Number(argument('episodes') ?? 400);
const sequenceLength = Number(argument('sequence-length') ?? 8192);
const rounds = Number(argument('rounds') ?? 5);
const renderDate = '2025-01-01T00:00:00Z';

async function simulatorTrajectories(count: number, seed = 'shard-bench'): Promise<Trajectory[]> {
  const harness = await loadHarness(sampleHarnessDirectory());
  const tasks = generateTasks({ count, seed, world: { itemCount: 1000 } });
  const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
  const trajectories: Trajectory[] = [];
  for (const task of tasks) trajectories.push(await runEpisode({ policy: expert, harness, task }));
  return trajectories;
}

function seconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** CPU seconds this process used since `start` (all threads: the stage's gzip work counts against it). */
function cpuSeconds(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

const format = (value: number) => Math.round(value).toLocaleString('en-US');
const percent = (value: number) => `${(value * 100).toFixed(1)}%`;

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/shard.bench.js [--episodes 400] [--sequence-length 8192] [--rounds 5]');
  const directory = mkdtempSync(path.join(tmpdir(), 'hat-shard-bench-'));
  const env = {} as Parameters<typeof createStoreCache>[0];
  const stores = createStoreCache(env, (root) => createArtifactStore(root, env));
  try {
    const trajectories = await simulatorTrajectories(episodes);
    const inputStore = stores.storeFor(`file://${directory}/input`);
    const input = await writeJsonl(inputStore, 'trajectories.jsonl.gz', trajectories);

    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const texts = trajectories.map((trajectory) => {
      const template = trajectoryToTemplateInput(trajectory.messages, trajectory.tools, tokenizer.templateFeatures);
      return tokenizer.render(template.messages, { tools: template.tools, now: new Date(renderDate) });
    });
    const rawEncode = () => {
      const start = process.hrtime.bigint();
      const cpu = process.cpuUsage();
      let tokens = 0;
      for (const text of texts) tokens += tokenizer.encode(text).length;
      return { tokens, seconds: seconds(start), cpuSeconds: cpuSeconds(cpu) };
    };
    // Warm both paths first (JIT, and the tokenizer's BPE word cache, which both share): one
    // untimed raw pass over every text, and the stage on a few conversations.
    rawEncode();
    const config = { inputs: [input.uri], sequenceLength, recordsPerPart: 100, renderDate };
    const warmStore = stores.storeFor(`file://${directory}/warm`);
    const warmInput = await writeJsonl(inputStore, 'warm.jsonl.gz', trajectories.slice(0, 20));
    await runStageLocally(
      shardStage,
      { ...config, inputs: [warmInput.uri] },
      { store: warmStore, openObject: stores.openObject, logger: createLogger({ level: 'warn' }), seed: 'bench' },
    );

    const rawBefore = rawEncode();
    const stageStart = process.hrtime.bigint();
    const stageCpu = process.cpuUsage();
    const result = await runStageLocally(shardStage, config, {
      store: stores.storeFor(`file://${directory}/out`),
      openObject: stores.openObject,
      logger: createLogger({ level: 'warn' }),
      seed: 'bench',
    });
    const stageSeconds = seconds(stageStart);
    const stageCpuSeconds = cpuSeconds(stageCpu);
    const rawAfter = rawEncode();
    // The per-sample tokenization alone, on conversations neither side has seen (the stage
    // above warmed the segment memo with this harness's common segments, as a part's first
    // samples do for the rest of a run): each round, raw encode of one fresh set against
    // tokenizeConversation of another of the same size, so neither gains from the other's caches.
    // Raw is the library's own Tokenizer as it ships (its LRU word cache, warmed on the stage's
    // texts); the stage's own instance (its word cache swapped for a generational one,
    // shared/text/word-cache.ts) encoding the same whole texts is printed beside it. Rounds
    // alternate which side goes first; each side's time is this thread's CPU time (the loops are
    // single-threaded, so a neighbour's load does not count against either), and the figure is
    // the median of the rounds' ratios.
    const tokenizeOptions = { trainOn: 'all' as const, now: new Date(renderDate) };
    const stock = await loadStockTokenizer(presetDirectory('qwen3'));
    for (const text of texts) stock.encode(text, { add_special_tokens: false });
    const measureCpu = (work: () => number) => {
      const cpu = process.cpuUsage();
      const tokens = work();
      return { tokens, seconds: cpuSeconds(cpu) };
    };
    const roundFigures: Array<{ raw: number; own: number; tokenize: number }> = [];
    for (let round = 0; round < rounds; round++) {
      const fresh = await simulatorTrajectories(2 * episodes, `shard-bench/fresh/${round}`);
      const freshRaw = fresh.slice(0, episodes).map((trajectory) => {
        const template = trajectoryToTemplateInput(trajectory.messages, trajectory.tools, tokenizer.templateFeatures);
        return tokenizer.render(template.messages, { tools: template.tools, now: new Date(renderDate) });
      });
      const raw = () =>
        measureCpu(() =>
          freshRaw.reduce((sum, text) => sum + stock.encode(text, { add_special_tokens: false }).ids.length, 0),
        );
      const tokenize = () =>
        measureCpu(() => {
          let tokens = 0;
          for (const trajectory of fresh.slice(episodes)) {
            const sample = tokenizeConversation(tokenizer, trajectory.messages, trajectory.tools, tokenizeOptions);
            if (sample.ok) tokens += sample.sample.inputIds.length;
          }
          return tokens;
        });
      const rawFirst = round % 2 === 0;
      const first = rawFirst ? raw() : tokenize();
      const second = rawFirst ? tokenize() : raw();
      const [rawFigure, tokenizeFigure] = rawFirst ? [first, second] : [second, first];
      const own = measureCpu(() => freshRaw.reduce((sum, text) => sum + tokenizer.encode(text).length, 0));
      roundFigures.push({
        raw: rawFigure.tokens / rawFigure.seconds,
        own: own.tokens / own.seconds,
        tokenize: tokenizeFigure.tokens / tokenizeFigure.seconds,
      });
    }
    const tokenizeRatios = roundFigures.map((figure) => figure.tokenize / figure.raw);
    const tokenizeRatio = median(tokenizeRatios);
    const ownRatio = median(roundFigures.map((figure) => figure.tokenize / figure.own));
    const tokenized = {
      tokensPerSecond: median(roundFigures.map((figure) => figure.tokenize)),
      raw: median(roundFigures.map((figure) => figure.raw)),
      own: median(roundFigures.map((figure) => figure.own)),
    };
    const output = result.output as ShardOutput;
    const stageTokens = Object.values(output.splits).reduce((sum, split) => sum + split.tokens, 0);
    const rawTokensPerSecond = (rawBefore.tokens + rawAfter.tokens) / (rawBefore.seconds + rawAfter.seconds);
    const stageTokensPerSecond = stageTokens / stageSeconds;
    const rawTokensPerCpuSecond = (rawBefore.tokens + rawAfter.tokens) / (rawBefore.cpuSeconds + rawAfter.cpuSeconds);
    const stageTokensPerCpuSecond = stageTokens / stageCpuSeconds;

    const lengths = texts.map((text) => tokenizer.encodeAt(text, []).ids.length);
    const fillAt = (capacity: number) => {
      const fitting = lengths.filter((length) => length <= capacity);
      const bins = packBestFitDecreasing(fitting, capacity);
      return {
        capacity,
        fill: fitting.reduce((sum, length) => sum + length, 0) / (bins.length * capacity),
        bound: fillUpperBound(fitting, capacity),
      };
    };
    // The packer on lengths that allow a tight packing: log-uniform 200-6,000 tokens (seeded).
    const rng = new Rng('shard-bench/lengths');
    const synthetic = Array.from({ length: 5000 }, () =>
      Math.round(Math.exp(Math.log(200) + rng.next() * (Math.log(6000) - Math.log(200)))),
    );
    const syntheticBins = packBestFitDecreasing(synthetic, sequenceLength);
    const syntheticFill = synthetic.reduce((sum, length) => sum + length, 0) / (syntheticBins.length * sequenceLength);
    const train = output.splits.train;
    console.log(
      `shard bench: ${trajectories.length} simulator trajectories, ${format(stageTokens)} tokens (mean ${format(stageTokens / output.samples)} per sample), qwen3, sequence length ${sequenceLength}`,
    );
    console.log(
      `raw encode      ${format(rawTokensPerSecond).padStart(10)} tok/s   (before ${format(rawBefore.tokens / rawBefore.seconds)}, after ${format(rawAfter.tokens / rawAfter.seconds)})`,
    );
    console.log(
      `stage, e2e      ${format(stageTokensPerSecond).padStart(10)} tok/s   (${stageSeconds.toFixed(2)} s, ${result.parts} parts)`,
    );
    console.log(
      `stage / raw     ${(stageTokensPerSecond / rawTokensPerSecond).toFixed(2).padStart(10)}         (goal >= 0.70; wall clock)`,
    );
    console.log(
      `stage / raw     ${(stageTokensPerCpuSecond / rawTokensPerCpuSecond).toFixed(2).padStart(10)}         (per CPU second: ${format(stageTokensPerCpuSecond)} vs ${format(rawTokensPerCpuSecond)} tok/s; steadier on a shared machine)`,
    );
    console.log(
      `tokenize        ${format(tokenized.tokensPerSecond).padStart(10)} tok/s   (tokenizeConversation per sample: render, spans, segmented encode, mask verification; per CPU second, median of ${rounds} rounds)`,
    );
    console.log(
      `tokenize / raw  ${tokenizeRatio.toFixed(2).padStart(10)}         (goal >= 3; median of rounds ${tokenizeRatios.map((ratio) => ratio.toFixed(2)).join(', ')}; raw: the library's stock encode, ${format(tokenized.raw)} tok/s; both on conversations first seen, ${episodes} each per round)`,
    );
    console.log(
      `tokenize / own  ${ownRatio.toFixed(2).padStart(10)}         (against the stage's own tokenizer instance encoding the whole texts, generational word cache: ${format(tokenized.own)} tok/s)`,
    );
    console.log(`fill, train     ${percent(train.fill).padStart(10)}         at ${sequenceLength} (goal >= 97%)`);
    const fills = [sequenceLength, 16384, 32768]
      .filter((capacity, index, all) => all.indexOf(capacity) === index)
      .map(fillAt);
    for (const figure of fills)
      console.log(
        `fill, BFD       ${percent(figure.fill).padStart(10)}         at ${figure.capacity}; best possible for whole samples ${percent(figure.bound)}`,
      );
    console.log(
      `fill, BFD       ${percent(syntheticFill).padStart(10)}         at ${sequenceLength} on 5,000 log-uniform lengths 200-6,000 (best possible ${percent(fillUpperBound(synthetic, sequenceLength))})`,
    );
    console.log(
      JSON.stringify({
        bench: 'shard',
        episodes: trajectories.length,
        tokens: stageTokens,
        rawTokensPerSecond: Math.round(rawTokensPerSecond),
        stageTokensPerSecond: Math.round(stageTokensPerSecond),
        ratio: Number((stageTokensPerSecond / rawTokensPerSecond).toFixed(3)),
        cpuRatio: Number((stageTokensPerCpuSecond / rawTokensPerCpuSecond).toFixed(3)),
        tokenizeTokensPerSecond: Math.round(tokenized.tokensPerSecond),
        tokenizeRatios: tokenizeRatios.map((ratio) => Number(ratio.toFixed(3))),
        ownRatio: Number(ownRatio.toFixed(3)),
        tokenizeRatio: Number(tokenizeRatio.toFixed(3)),
        trainFill: Number(train.fill.toFixed(4)),
        fills: fills.map((figure) => ({
          sequenceLength: figure.capacity,
          fill: Number(figure.fill.toFixed(4)),
          bound: Number(figure.bound.toFixed(4)),
        })),
        syntheticFill: Number(syntheticFill.toFixed(4)),
      }),
    );
  } finally {
    await stores.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
