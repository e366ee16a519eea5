import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { z } from 'zod';
import { escapeHtml } from '../../shared/report/html';
import { Rng } from '../../shared/random/rng';
import { mean, percentileOfSorted, type Interval } from './bootstrap-interval';
import type { EvalResult } from './eval-part';

/**
 * An experiment over the models of one eval: arms (a training recipe) each trained with several
 * seeds, scored on the same items. Every cell is a mean over seeds and items with a hierarchical
 * bootstrap 95% interval (seeds resampled, then items within the draw), and every difference of
 * two arms is paired twice: seed i of one arm against seed i of the other, item against item.
 *
 * ```yaml
 * experiment:
 *   arms:
 *     - { name: A, title: fixed-harness SFT, models: [a1, a2, a3] }
 *     - { name: B, title: HSA-SFT, models: [b1, b2, b3] }
 *   claims:
 *     - { text: HSA-SFT beats fixed-harness SFT on held-out variants, difference: [B, A], column: held_out_variants, atLeast: 20 }
 * ```
 */

/** The table's columns: which items a cell averages. */
export const experimentColumns = [
  'live_stream_qa',
  'canonical',
  'seen_variants',
  'held_out_variants',
  'held_out_operators',
] as const;
export type ExperimentColumn = (typeof experimentColumns)[number];

const columnTitles: Record<ExperimentColumn, string> = {
  live_stream_qa: 'Live-Stream QA (canonical)',
  canonical: 'Harness-Variant QA: canonical',
  seen_variants: 'HV-QA: seen variants',
  held_out_variants: 'HV-QA: held-out variants',
  held_out_operators: 'HV-QA: held-out operators',
};

const armName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/, 'use letters, digits, "_" and "-"');

export const experimentSchema = z
  .object({
    arms: z
      .array(
        z
          .object({
            name: armName,
            /** What the arm is, in the report. Default: its name. */
            title: z.string().min(1).optional(),
            /** Model labels, one per training seed, in seed order (paired by position across arms). */
            models: z.array(z.string().min(1)).min(1),
          })
          .strict(),
      )
      .min(1),
    /** Claims checked against paired differences; each gets a sentence: reproduced or not, with the interval. */
    claims: z
      .array(
        z
          .object({
            text: z.string().min(1),
            difference: z.tuple([armName, armName]),
            column: z.enum(experimentColumns),
            /** Reproduced when the mean difference is at least this and its interval lies above 0. */
            atLeast: z.number().optional(),
            /** Reproduced when the mean difference is not below this (a cost bound, e.g. -3). */
            notBelow: z.number().optional(),
          })
          .strict()
          .refine((claim) => (claim.atLeast === undefined) !== (claim.notBelow === undefined), {
            message: 'give exactly one of atLeast and notBelow',
          }),
      )
      .default([]),
  })
  .strict();
export type ExperimentConfig = z.infer<typeof experimentSchema>;

/** Problems of an experiment against the eval's model labels (paths relative to `experiment`). */
export function experimentProblems(
  experiment: ExperimentConfig,
  labels: readonly string[],
): Array<{ path: Array<string | number>; message: string }> {
  const problems: Array<{ path: Array<string | number>; message: string }> = [];
  const names = experiment.arms.map((arm) => arm.name);
  const seeds = experiment.arms[0].models.length;
  experiment.arms.forEach((arm, index) => {
    if (names.indexOf(arm.name) !== index)
      problems.push({ path: ['arms', index, 'name'], message: `arm "${arm.name}" is named twice` });
    if (arm.models.length !== seeds)
      problems.push({
        path: ['arms', index, 'models'],
        message: `every arm needs the same number of seeds (paired by position): ${arm.name} has ${arm.models.length}, ${experiment.arms[0].name} has ${seeds}`,
      });
    arm.models.forEach((model, position) => {
      if (!labels.includes(model))
        problems.push({
          path: ['arms', index, 'models', position],
          message: `no model labelled "${model}" in models; use one of ${labels.join(', ')}`,
        });
    });
  });
  experiment.claims.forEach((claim, index) => {
    claim.difference.forEach((name, side) => {
      if (!names.includes(name))
        problems.push({
          path: ['claims', index, 'difference', side],
          message: `no arm named "${name}"; use one of ${names.join(', ')}`,
        });
    });
  });
  return problems;
}

/** Which column an item result counts in (undefined: none). */
function columnsOf(result: EvalResult): ExperimentColumn[] {
  if (result.suite === 'live_stream_qa') return ['live_stream_qa'];
  if (result.suite !== 'harness_variant_qa' || !result.harness) return [];
  if (result.harness.kind === 'canonical') return ['canonical'];
  if (result.harness.heldOutOperator) return ['held_out_operators'];
  return result.harness.heldOutVariant ? ['held_out_variants'] : ['seen_variants'];
}

export interface ExperimentCell extends Interval {
  /** Each seed's mean (the arm's models in order). */
  perSeed: number[];
}

export interface ExperimentDifference extends Interval {
  a: string;
  b: string;
  column: ExperimentColumn;
  perSeed: number[];
  seeds: number;
}

export interface ExperimentClaim {
  text: string;
  reproduced: boolean;
  difference: ExperimentDifference;
  sentence: string;
}

export interface ExperimentOutcome {
  arms: Array<{ name: string; title: string; models: string[] }>;
  columns: ExperimentColumn[];
  /** arm → column → mean over seeds and items, with the interval. */
  table: Record<string, Partial<Record<ExperimentColumn, ExperimentCell>>>;
  /** Consecutive arms (B − A, C − B, ...) and every claim's pair, on every column. */
  differences: ExperimentDifference[];
  claims: ExperimentClaim[];
  /** model → its training loss curve, when its trainer's result.json sits beside the model directory. */
  curves: Record<string, Array<{ step: number; loss: number }>>;
  /**
   * Models whose training stopped before its maxSteps (maxSeconds ran out): the arms they are in
   * were compared at unequal budgets. Present only when there is one.
   */
  shortTrainings?: Array<{ model: string; steps: number; maxSteps: number; maxSeconds?: number }>;
  bootstrapSamples: number;
}

/** Item scores of one model on one column, keyed by item id. */
function scoresBy(results: readonly EvalResult[], model: string, column: ExperimentColumn): Map<string, number> {
  const scores = new Map<string, number>();
  for (const result of results)
    if (result.model === model && result.score !== null && columnsOf(result).includes(column))
      scores.set(result.itemId, result.score);
  return scores;
}

/**
 * Hierarchical percentile bootstrap of the mean of `values[seed][item]`: each draw resamples the
 * seeds, then the items (the same item draw for every seed of the draw, so paired values stay paired).
 */
function hierarchicalInterval(values: number[][], samples: number, seed: string): Interval {
  const seeds = values.length;
  const items = values[0]?.length ?? 0;
  const overall = mean(values.map((row) => mean(row)));
  if (seeds === 0 || items === 0) return { score: 0, low: 0, high: 0, items: 0 };
  const rng = new Rng(`bootstrap/${seed}`);
  const draws: number[] = [];
  for (let sample = 0; sample < samples; sample++) {
    let sum = 0;
    const itemDraw = Array.from({ length: items }, () => Math.floor(rng.next() * items));
    for (let s = 0; s < seeds; s++) {
      const row = values[Math.floor(rng.next() * seeds)];
      for (const index of itemDraw) sum += row[index];
    }
    draws.push(sum / (seeds * items));
  }
  draws.sort((left, right) => left - right);
  return {
    score: overall,
    low: percentileOfSorted(draws, 0.025),
    high: percentileOfSorted(draws, 0.975),
    items,
  };
}

/** The item ids every given model answered on a column (sorted, so draws do not depend on result order). */
function sharedItems(maps: ReadonlyArray<Map<string, number>>): string[] {
  if (maps.length === 0) return [];
  return [...maps[0].keys()].filter((id) => maps.every((map) => map.has(id))).sort();
}

function cellOf(
  results: readonly EvalResult[],
  models: readonly string[],
  column: ExperimentColumn,
  samples: number,
  seed: string,
) {
  const maps = models.map((model) => scoresBy(results, model, column));
  const ids = sharedItems(maps);
  if (ids.length === 0) return undefined;
  const values = maps.map((map) => ids.map((id) => map.get(id) as number));
  return { ...hierarchicalInterval(values, samples, seed), perSeed: values.map((row) => mean(row)) };
}

function differenceOf(
  results: readonly EvalResult[],
  a: ExperimentConfig['arms'][number],
  b: ExperimentConfig['arms'][number],
  column: ExperimentColumn,
  samples: number,
  seed: string,
): ExperimentDifference | undefined {
  const mapsA = a.models.map((model) => scoresBy(results, model, column));
  const mapsB = b.models.map((model) => scoresBy(results, model, column));
  const ids = sharedItems([...mapsA, ...mapsB]);
  if (ids.length === 0) return undefined;
  const values = mapsA.map((map, s) => ids.map((id) => (map.get(id) as number) - (mapsB[s].get(id) as number)));
  const interval = hierarchicalInterval(values, samples, `${seed}/${a.name}-${b.name}/${column}`);
  return {
    ...interval,
    a: a.name,
    b: b.name,
    column,
    perSeed: values.map((row) => mean(row)),
    seeds: values.length,
  };
}

const signed = (value: number) => `${value >= 0 ? '+' : ''}${value.toFixed(1)}`;

export function formatDifference(difference: ExperimentDifference): string {
  return `${difference.a} − ${difference.b} = ${signed(difference.score)} [${signed(difference.low)}, ${signed(difference.high)}] on ${columnTitles[difference.column]} (${difference.seeds} seeds × ${difference.items} items)`;
}

/** The experiment's table, differences and claims from the eval's results (deterministic under `seed`). */
export async function buildExperiment(
  experiment: ExperimentConfig,
  results: readonly EvalResult[],
  options: { bootstrapSamples: number; seed: string; modelDirs: Record<string, string | undefined> },
): Promise<ExperimentOutcome> {
  const samples = options.bootstrapSamples;
  const arms = experiment.arms.map((arm) => ({ name: arm.name, title: arm.title ?? arm.name, models: arm.models }));
  const table: ExperimentOutcome['table'] = {};
  const columns = experimentColumns.filter((column) => results.some((result) => columnsOf(result).includes(column)));
  for (const arm of experiment.arms) {
    table[arm.name] = {};
    for (const column of columns) {
      const cell = cellOf(results, arm.models, column, samples, `${options.seed}/experiment/${arm.name}/${column}`);
      if (cell) table[arm.name][column] = cell;
    }
  }
  const pairs: Array<[string, string]> = experiment.arms
    .slice(1)
    .map((arm, index): [string, string] => [arm.name, experiment.arms[index].name]);
  for (const claim of experiment.claims)
    if (!pairs.some(([a, b]) => a === claim.difference[0] && b === claim.difference[1])) pairs.push(claim.difference);
  const byName = new Map(experiment.arms.map((arm) => [arm.name, arm]));
  const differences: ExperimentDifference[] = [];
  for (const [a, b] of pairs)
    for (const column of columns) {
      const found = differenceOf(
        results,
        byName.get(a) as ExperimentConfig['arms'][number],
        byName.get(b) as ExperimentConfig['arms'][number],
        column,
        samples,
        `${options.seed}/experiment`,
      );
      if (found) differences.push(found);
    }
  const claims = experiment.claims.map((claim): ExperimentClaim => {
    const difference = differences.find(
      (item) => item.a === claim.difference[0] && item.b === claim.difference[1] && item.column === claim.column,
    ) ?? {
      a: claim.difference[0],
      b: claim.difference[1],
      column: claim.column,
      score: 0,
      low: 0,
      high: 0,
      items: 0,
      perSeed: [],
      seeds: 0,
    };
    const reproduced =
      difference.items > 0 &&
      (claim.atLeast !== undefined
        ? difference.score >= claim.atLeast && difference.low > 0
        : difference.score >= (claim.notBelow as number));
    const bound =
      claim.atLeast !== undefined
        ? `needs ≥ ${signed(claim.atLeast)} with the interval above 0`
        : `needs ≥ ${signed(claim.notBelow as number)}`;
    const sentence =
      difference.items === 0
        ? `${claim.text}: not measured (no items on ${columnTitles[claim.column]}).`
        : `${claim.text}: ${reproduced ? 'reproduced' : 'not reproduced'}: ${formatDifference(difference)}; ${bound}.`;
    return { text: claim.text, reproduced, difference, sentence };
  });
  const curves: ExperimentOutcome['curves'] = {};
  const shortTrainings: NonNullable<ExperimentOutcome['shortTrainings']> = [];
  for (const arm of experiment.arms)
    for (const model of arm.models) {
      const training = await trainingResult(options.modelDirs[model]);
      if (Array.isArray(training?.lossCurve)) curves[model] = training.lossCurve;
      const maxSteps = training?.config?.maxSteps;
      if (typeof training?.steps === 'number' && typeof maxSteps === 'number' && training.steps < maxSteps) {
        const maxSeconds = training.config?.maxSeconds;
        shortTrainings.push({
          model,
          steps: training.steps,
          maxSteps,
          ...(typeof maxSeconds === 'number' ? { maxSeconds } : {}),
        });
      }
    }
  return {
    arms,
    columns,
    table,
    differences,
    claims,
    curves,
    ...(shortTrainings.length > 0 ? { shortTrainings } : {}),
    bootstrapSamples: samples,
  };
}

/** What the pipeline's trainer wrote in `result.json` beside a local model directory (`<out>/onnx`), as far as the experiment reads it. */
interface TrainingResult {
  lossCurve?: Array<{ step: number; loss: number }>;
  steps?: number;
  config?: { maxSteps?: number; maxSeconds?: number };
}

async function trainingResult(modelDir: string | undefined): Promise<TrainingResult | undefined> {
  if (modelDir === undefined || !isAbsolute(modelDir)) return undefined;
  try {
    return JSON.parse(await readFile(join(dirname(modelDir), 'result.json'), 'utf8')) as TrainingResult;
  } catch {
    return undefined;
  }
}

const armColors = ['#d1242f', '#1f6feb', '#1a7f37', '#8250df', '#bf8700', '#57606a'];

function cellHtml(cell: Interval | undefined): string {
  if (!cell) return '<td>–</td>';
  return `<td>${cell.score.toFixed(1)} <span class="ci">[${cell.low.toFixed(1)}, ${cell.high.toFixed(1)}]</span></td>`;
}

/** Every arm's training loss curves on one chart (one colour per arm, one line per seed). */
function curvesSvg(outcome: ExperimentOutcome): string {
  const lines = outcome.arms.flatMap((arm, index) =>
    arm.models
      .filter((model) => (outcome.curves[model]?.length ?? 0) >= 2)
      .map((model) => ({ arm: arm.name, color: armColors[index % armColors.length], curve: outcome.curves[model] })),
  );
  if (lines.length === 0) return '<p>No training curves found beside the model directories.</p>';
  const width = 560;
  const height = 220;
  const pad = { left: 48, right: 90, top: 10, bottom: 24 };
  const steps = lines.flatMap((line) => line.curve.map((point) => point.step));
  const losses = lines.flatMap((line) => line.curve.map((point) => point.loss));
  const [maxStep, minLoss, maxLoss] = [Math.max(...steps), Math.min(...losses), Math.max(...losses)];
  const x = (step: number) => pad.left + (step / Math.max(1, maxStep)) * (width - pad.left - pad.right);
  const y = (loss: number) =>
    pad.top + (1 - (loss - minLoss) / Math.max(1e-9, maxLoss - minLoss)) * (height - pad.top - pad.bottom);
  const polylines = lines
    .map(
      (line) =>
        `<polyline fill="none" stroke="${line.color}" stroke-width="1.3" opacity="0.8" points="${line.curve.map((point) => `${x(point.step).toFixed(1)},${y(point.loss).toFixed(1)}`).join(' ')}"/>`,
    )
    .join('');
  const legend = outcome.arms
    .map(
      (arm, index) =>
        `<text x="${width - pad.right + 8}" y="${pad.top + 14 * (index + 1)}" font-size="11" fill="${armColors[index % armColors.length]}">${escapeHtml(arm.name)}</text>`,
    )
    .join('');
  return (
    `<svg width="${width}" height="${height}" role="img" aria-label="training loss by step, every arm and seed">` +
    `${polylines}${legend}` +
    `<line x1="${pad.left}" y1="${height - pad.bottom}" x2="${width - pad.right}" y2="${height - pad.bottom}" stroke="#888"/>` +
    `<text x="2" y="${pad.top + 8}" font-size="10">${maxLoss.toFixed(2)}</text>` +
    `<text x="2" y="${height - pad.bottom}" font-size="10">${minLoss.toFixed(2)}</text>` +
    `<text x="${pad.left}" y="${height - 6}" font-size="10">step 0</text>` +
    `<text x="${width - pad.right - 50}" y="${height - 6}" font-size="10">step ${maxStep}</text></svg>`
  );
}

/** A warning under the claims when a model trained fewer steps than asked: its arm had a smaller budget. */
function shortTrainingsHtml(outcome: ExperimentOutcome): string {
  if (!outcome.shortTrainings?.length) return '';
  const entries = outcome.shortTrainings
    .map(
      (entry) =>
        `${escapeHtml(entry.model)} trained ${entry.steps} of its ${entry.maxSteps} steps${entry.maxSeconds === undefined ? '' : ` (maxSeconds ${entry.maxSeconds} ran out)`}`,
    )
    .join('; ');
  return `<p class="not"><b>Unequal budgets</b>: ${entries}. The differences that involve these models compare arms trained for different numbers of steps; raise maxSeconds and train again.</p>`;
}

/** The report section: the table in the source report's shape, per-seed figures, differences, claims, curves. */
export function experimentHtml(outcome: ExperimentOutcome): string {
  const head = `<tr><th>arm</th>${outcome.columns.map((column) => `<th>${escapeHtml(columnTitles[column])}</th>`).join('')}</tr>`;
  const rows = outcome.arms
    .map(
      (arm) =>
        `<tr><td><b>${escapeHtml(arm.name)}</b> ${escapeHtml(arm.title)}</td>${outcome.columns.map((column) => cellHtml(outcome.table[arm.name]?.[column])).join('')}</tr>`,
    )
    .join('');
  const perSeed = outcome.arms
    .flatMap((arm) =>
      arm.models.map(
        (model, position) =>
          `<tr><td>${escapeHtml(arm.name)} seed ${position + 1} (${escapeHtml(model)})</td>${outcome.columns
            .map((column) => {
              const value = outcome.table[arm.name]?.[column]?.perSeed[position];
              return `<td>${value === undefined ? '–' : value.toFixed(1)}</td>`;
            })
            .join('')}</tr>`,
      ),
    )
    .join('');
  const differences = outcome.differences
    .map(
      (difference) =>
        `<tr><td>${escapeHtml(`${difference.a} − ${difference.b}`)}</td><td>${escapeHtml(columnTitles[difference.column])}</td>${cellHtml(difference)}<td>${difference.perSeed.map((value) => signed(value)).join(', ')}</td></tr>`,
    )
    .join('');
  const claims = outcome.claims
    .map(
      (claim) =>
        `<li class="${claim.reproduced ? 'ok' : 'not'}"><b>${claim.reproduced ? 'Reproduced' : 'Not reproduced'}</b>: ${escapeHtml(claim.sentence)}</li>`,
    )
    .join('');
  return (
    `<h2>Experiment</h2><p>Mean over seeds and items, 95% hierarchical bootstrap interval (seeds, then items; ${outcome.bootstrapSamples} draws).</p>` +
    `<table>${head}${rows}</table>` +
    (claims ? `<h3>Claims</h3><ul class="claims">${claims}</ul>` : '') +
    shortTrainingsHtml(outcome) +
    `<h3>Paired differences</h3><table><tr><th>arms</th><th>column</th><th>difference</th><th>per seed</th></tr>${differences}</table>` +
    `<h3>Per seed</h3><table>${head.replace('<th>arm</th>', '<th>model</th>')}${perSeed}</table>` +
    `<h3>Training loss</h3>${curvesSvg(outcome)}`
  );
}
