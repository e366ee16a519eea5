/**
 * rl stage speed with the stochastic scripted policy (everything in-process, a file store):
 * 1. episodes per second of the whole stage (plan, parts, finish: variants, episodes, verifier,
 *    advantages, token views, Parquet and JSONL, stats, report, manifest);
 * 2. the stage's overhead per environment step: stage wall time minus the time inside
 *    runEpisode (policy + simulator: tools, viewer, hooks, verifier), divided by the steps
 *    (policy calls); split into the token views (render, tokenize, verify masks), the HSA
 *    variants (one per non-canonical group) and the rest.
 * Parts and episodes run one at a time so the summed in-episode times do not overlap. The first
 * round warms up (tokenizer load, JIT) and is not counted; figures are medians of the others.
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/rl.bench.js [--groups 50] [--group-size 8] [--rounds 3]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { silentLogger } from '../shared/log/logger';
import { rlStage } from '../workers/rl/processor';
import type { RlOutput } from '../workers/rl/rl-contract';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index === -1 ? undefined : Number(process.argv[index + 1]);
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

const groups = argument('groups', 50);
const groupSize = argument('group-size', 8);
const rounds = argument('rounds', 3);

interface Round {
  wallMs: number;
  /** Process CPU time (user + system): steadier than wall time on a shared machine. */
  cpuMs: number;
  output: RlOutput;
}

async function round(seed: string): Promise<Round> {
  const directory = await mkdtemp(join(tmpdir(), 'hat-rl-bench-'));
  try {
    const store = new FileArtifactStore(directory);
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const result = await runStageLocally(
      rlStage,
      {
        generate: { count: Math.max(16, groups), seed: 'bench' },
        groups,
        groupSize,
        groupsPerPart: 16,
        episodeConcurrency: 1,
      },
      { store, openObject: (uri) => openArtifactObject(uri), logger: silentLogger(), seed, concurrency: 1 },
    );
    const cpu = process.cpuUsage(cpuBefore);
    return {
      wallMs: performance.now() - started,
      cpuMs: (cpu.user + cpu.system) / 1000,
      output: result.output as RlOutput,
    };
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/rl.bench.js [--groups 50] [--group-size 8] [--rounds 3]');
  await round('warm-up');
  const measured: Round[] = [];
  for (let index = 0; index < rounds; index++) measured.push(await round(`bench-${index}`));
  const pick = (value: (entry: Round) => number) => median(measured.map(value));
  const { episodes } = measured[0].output;
  const steps = pick((entry) => entry.output.timing.steps);
  const wallMs = pick((entry) => entry.wallMs);
  const cpuMs = pick((entry) => entry.cpuMs);
  const episodeMs = pick((entry) => entry.output.timing.episodeMs);
  const policyMs = pick((entry) => entry.output.timing.policyMs);
  const tokenViewMs = pick((entry) => entry.output.timing.tokenViewMs);
  const overheadMs = pick((entry) => entry.wallMs - entry.output.timing.episodeMs);
  const variantMs = pick((entry) => entry.output.timing.variantMs);
  const otherMs = pick(
    (entry) =>
      entry.wallMs - entry.output.timing.episodeMs - entry.output.timing.tokenViewMs - entry.output.timing.variantMs,
  );
  const micros = (ms: number) => ((ms * 1000) / steps).toFixed(0);
  console.log(
    `rl stage, stochastic scripted policy: ${groups} groups x ${groupSize} = ${episodes} episodes, ${steps} environment steps (${(steps / episodes).toFixed(2)} per episode), median of ${rounds} rounds`,
  );
  console.log(
    `stage:            ${((episodes / wallMs) * 1000).toFixed(1)} episodes/s (${(wallMs / 1000).toFixed(2)} s wall, plan + parts + finish); ${((episodes / cpuMs) * 1000).toFixed(1)} episodes per CPU second`,
  );
  console.log(`episodes alone:   ${((episodes / episodeMs) * 1000).toFixed(1)} episodes/s inside runEpisode`);
  console.log(
    `per step:         policy ${micros(policyMs)} µs, simulator ${micros(episodeMs - policyMs)} µs (tools, viewer, hooks, verifier, loop)`,
  );
  console.log(`stage overhead:   ${micros(overheadMs)} µs per step (stage wall - runEpisode time)`);
  console.log(`  token views:    ${micros(tokenViewMs)} µs per step (chat template render, tokenize, mask checks)`);
  console.log(
    `  HSA variants:   ${micros(variantMs)} µs per step (a fresh variant per non-canonical group, validated and leak-checked)`,
  );
  console.log(
    `  everything else: ${micros(otherMs)} µs per step (plan, advantages, records, Parquet + JSONL, stats, report, manifest)`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
