/**
 * Gate decisions under the interval rule (#33): how often the nightly gate promotes a candidate
 * whose true difference from the promoted checkpoint is known, under the old point-estimate rules
 * and under the default interval rule of examples/nightly.yaml. Simulated nights on the nightly
 * sizes (Live-Stream QA 440 items, Harness-Variant QA 440 variant items, IFEval 541 prompts):
 * each item has a pass probability (60% easy items at 0.95, 40% hard ones at 0.15), the promoted
 * model and the candidate each draw pass/fail per item (0 or 100), the candidate with its true
 * difference added to every item's probability on the suites a scenario names. The paired
 * differences and their bootstrap intervals are the eval's own (`pairedDifference`); the decisions
 * are the gate's own (`evaluateGate`). Seeded: the same flags give the same table.
 *
 *   make build-dev && node dist/bench/gate-interval.bench.js [--nights 200] [--resamples 1000]
 */
import { pairedDifference } from '../shared/eval/bootstrap-interval';
import { Rng } from '../shared/random/rng';
import { evaluateGate, type PairedComparison } from '../queues/runs/run-gate';
import { checkBenchFlags } from './bench-flags';

function flag(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const suites = { live_stream_qa: 440, harness_variant_qa: 440, ifeval: 541 } as const;
type Suite = keyof typeof suites;

/** The old nightly rules (point estimates with half a point of tolerance). */
const pointRules = [
  'live_stream_qa >= promoted - 0.5',
  'harness_variant_qa >= promoted - 0.5',
  'ifeval >= promoted - 1',
];
/** The default rule of examples/nightly.yaml: not significantly worse anywhere, significantly better somewhere. */
const intervalRules = [
  'delta(live_stream_qa, promoted).high > 0',
  'delta(harness_variant_qa, promoted).high > 0',
  'delta(ifeval, promoted).high > 0',
  'delta(live_stream_qa, promoted).low > 0 or delta(harness_variant_qa, promoted).low > 0 or delta(ifeval, promoted).low > 0',
];

interface Scenario {
  name: string;
  /** True difference candidate − promoted in points, per suite (absent: 0). */
  delta: Partial<Record<Suite, number>>;
}

const scenarios: Scenario[] = [
  { name: 'same model (Δ 0 everywhere)', delta: {} },
  { name: 'better by 5 on Live-Stream QA', delta: { live_stream_qa: 5 } },
  { name: 'better by 10 on Live-Stream QA', delta: { live_stream_qa: 10 } },
  { name: 'better by 10 on LSQA, worse by 5 on IFEval', delta: { live_stream_qa: 10, ifeval: -5 } },
  { name: 'better by 10 on LSQA, worse by 10 on IFEval', delta: { live_stream_qa: 10, ifeval: -10 } },
  { name: 'worse by 5 on Live-Stream QA', delta: { live_stream_qa: -5 } },
];

function night(
  scenario: Scenario,
  rng: Rng,
  resamples: number,
  seed: string,
): {
  metrics: Record<string, Record<string, number>>;
  comparisons: PairedComparison[];
} {
  const metrics: Record<string, Record<string, number>> = { new: {}, promoted: {} };
  const comparisons: PairedComparison[] = [];
  for (const [suite, items] of Object.entries(suites) as Array<[Suite, number]>) {
    const promoted: number[] = [];
    const candidate: number[] = [];
    const shift = (scenario.delta[suite] ?? 0) / 100;
    for (let item = 0; item < items; item++) {
      const p = rng.next() < 0.6 ? 0.95 : 0.15;
      promoted.push(rng.next() < p ? 100 : 0);
      candidate.push(rng.next() < Math.min(1, Math.max(0, p + shift)) ? 100 : 0);
    }
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    metrics.new[suite] = mean(candidate);
    metrics.promoted[suite] = mean(promoted);
    comparisons.push({
      a: 'new',
      b: 'promoted',
      suite,
      difference: pairedDifference(candidate, promoted, resamples, `${seed}/${suite}`),
    });
  }
  return { metrics, comparisons };
}

function main(): void {
  checkBenchFlags('node dist/bench/gate-interval.bench.js [--nights 200] [--resamples 1000]');
  const nights = flag('--nights', 200);
  const resamples = flag('--resamples', 1000);
  const started = Date.now();
  console.log(`gate decisions over ${nights} simulated nights per scenario (bootstrap ${resamples} resamples)`);
  console.log('| candidate (true difference) | promoted, point rules | promoted, interval rule |');
  console.log('|---|---|---|');
  for (const scenario of scenarios) {
    const rng = new Rng(`gate-interval/${scenario.name}`);
    let point = 0;
    let interval = 0;
    for (let index = 0; index < nights; index++) {
      const { metrics, comparisons } = night(scenario, rng, resamples, `${scenario.name}/${index}`);
      const evidence = { comparisons, errors: { failed: 0, items: 1421 } };
      if (evaluateGate(pointRules, 'new', metrics, evidence).decision === 'promote') point += 1;
      if (evaluateGate(intervalRules, 'new', metrics, evidence).decision === 'promote') interval += 1;
    }
    const share = (count: number) => `${((count / nights) * 100).toFixed(1)}%`;
    console.log(`| ${scenario.name} | ${share(point)} | ${share(interval)} |`);
  }
  console.log(`(${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

main();
