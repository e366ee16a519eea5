import { referenceSharesSchema } from '../../../shared/simulator/tasks/task-generator';
import { z } from 'zod';
import { expandInputs } from '../../../queues/stage-kit/stage-inputs';
import { readTaskSets } from '../../../queues/stage-kit/task-inputs';
import { escapeHtml } from '../../../shared/report/html';
import { textStyles } from '../../../shared/simulator/world/text-style';
import { taskCategories, taskSchema } from '../../../shared/simulator/tasks/task-schema';
import { bootstrapMean, mean, type Interval } from '../bootstrap-interval';
import { fixed, intervalTable } from '../report-cells';
import { defineEvalSuite } from './eval-suite';
import {
  asArtifactUri,
  group,
  heldOutTasks,
  intervals,
  playEpisode,
  refuseDuplicateIds,
  scoreOf,
  seedValue,
  uriList,
} from './suite-kit';

/**
 * Live-Stream QA: held-out generated simulator tasks (every category in turn) plus imported
 * production Q&A, each a full agent episode under the canonical harness, scored by the verifier.
 */

export const liveStreamQaSchema = z
  .object({
    /** Held-out generated tasks, spread evenly over every task category. Default 44 (4 per category). 0 with `tasks` for imported ones only. */
    size: z.number().int().min(0).max(100_000).default(44),
    /** Seed of the held-out task generator: never a training seed. Default "eval/live_stream_qa". */
    seed: seedValue.default('eval/live_stream_qa'),
    /** Categories to draw from. Default: every category. */
    categories: z.array(z.enum(taskCategories)).min(1).optional(),
    /** How viewers refer to items in the generated tasks (as collect's `generate.references`). */
    references: referenceSharesSchema.optional(),
    /** The text of the generated tasks (as collect's `generate.text`): `default` or `cjk-heavy`. Default `default`. */
    text: z.enum(textStyles).optional(),
    /** Imported production Q&A (`hat tasks import` output or a collect manifest): played and scored like generated tasks. */
    tasks: uriList.default([]),
  })
  .strict()
  .refine((suite) => suite.size > 0 || suite.tasks.length > 0, {
    message: 'size 0 needs imported tasks; give tasks or a size',
    path: ['size'],
  });

export const liveStreamQaItemSchema = z.object({
  suite: z.literal('live_stream_qa'),
  id: z.string(),
  category: z.string(),
  origin: z.enum(['generated', 'imported']),
  task: taskSchema,
});

export interface LiveStreamQaBreakdown {
  overall: Interval;
  byCategory: Record<string, Interval>;
  components: Record<string, number>;
  byOrigin: Record<string, Interval>;
}

export const liveStreamQaSuite = defineEvalSuite({
  name: 'live_stream_qa',
  version: 1,
  title: 'Live-Stream QA',
  shortName: 'LSQA',
  configSchema: liveStreamQaSchema,
  itemSchema: liveStreamQaItemSchema,
  needsHarness: true,
  usesTrainingFootprint: false,
  headlineMetric: 'live_stream_qa',

  async buildItems(live, context) {
    const generated = heldOutTasks(live.size, live.seed, live.categories, live.references, live.text);
    const imported =
      live.tasks.length > 0
        ? await readTaskSets(
            await expandInputs(
              live.tasks.map(asArtifactUri),
              context.openObject,
              'suites.live_stream_qa.tasks',
              'tasks',
            ),
            context.openObject,
          )
        : { tasks: [], lineage: [] };
    const items = [
      ...generated.map((task) => ({
        suite: 'live_stream_qa' as const,
        id: task.id,
        category: task.category,
        origin: 'generated' as const,
        task,
      })),
      ...imported.tasks.map((task) => ({
        suite: 'live_stream_qa' as const,
        id: task.id,
        category: task.category,
        origin: 'imported' as const,
        task,
      })),
    ];
    refuseDuplicateIds(items, 'suites.live_stream_qa');
    return { items, lineage: imported.lineage };
  },

  promptText: (item) => item.task.turns.map((turn) => turn.message).join('\n'),
  simulatorTask: (item) => item.task,
  prepareHarness: async (_item, context) => context.canonical,
  failedChecks: () => [],

  evaluate: (item, context) => playEpisode(item.task, context, { category: item.category, origin: item.origin }),

  outcomeScore: (result) => result.score,

  score(results, { samples, seed }) {
    const components: Record<string, number> = {};
    for (const name of [...new Set(results.flatMap((result) => Object.keys(result.components ?? {})))].sort()) {
      components[name] = mean(results.map((result) => (result.components?.[name] ?? 0) * 100));
    }
    const breakdown: LiveStreamQaBreakdown = {
      overall: bootstrapMean(results.map(scoreOf), samples, seed),
      byCategory: intervals(
        group(results, (result) => result.category),
        samples,
        `${seed}/category`,
      ),
      components,
      byOrigin: intervals(
        group(results, (result) => result.origin),
        samples,
        `${seed}/origin`,
      ),
    };
    const metrics: Record<string, number> = { live_stream_qa: breakdown.overall.score };
    for (const [category, cell] of Object.entries(breakdown.byCategory))
      metrics[`live_stream_qa.${category}`] = cell.score;
    for (const [component, value] of Object.entries(breakdown.components))
      metrics[`live_stream_qa.component.${component}`] = value;
    return { breakdown, headline: breakdown.overall, metrics };
  },

  reportHtml({ labels, modelName, breakdownOf }) {
    const categories = [
      ...new Set(labels.flatMap((label) => Object.keys(breakdownOf(label)?.byCategory ?? {}))),
    ].sort();
    const components = [...new Set(labels.flatMap((label) => Object.keys(breakdownOf(label)?.components ?? {})))];
    return (
      `<h2>Live-Stream QA by category</h2>${intervalTable(
        labels.map(modelName),
        categories.map((category) => [category, labels.map((label) => breakdownOf(label)?.byCategory[category])]),
      )}\n` +
      `<h3>Verifier components (mean × 100)</h3><table><tr><th></th>${components.map((name) => `<th>${escapeHtml(name)}</th>`).join('')}</tr>${labels
        .map(
          (label) =>
            `<tr><th>${escapeHtml(modelName(label))}</th>${components.map((name) => `<td>${fixed(breakdownOf(label)?.components[name])}</td>`).join('')}</tr>`,
        )
        .join('')}</table>`
    );
  },
});
