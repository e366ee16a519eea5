import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { expandInputs, readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { readTaskSets } from '../../queues/stage-kit/task-inputs';
import { loadIfevalItems, validateInstructionSpec } from '../../shared/eval/ifeval';
import { BadInputError, HatError, ProblemCollector } from '../../shared/errors';
import type { Harness } from '../../shared/harness/harness-types';
import { generateVariantPool, type FamilyWeights } from '../../shared/harness/hsa/generate-variant';
import { hsaFamilies, hsaFamilySchema, type HsaFamily } from '../../shared/harness/hsa/variant-mapping';
import { Rng } from '../../shared/random/rng';
import { generateTask } from '../../shared/simulator/tasks/generate-tasks';
import { taskCategories, taskSchema, type Task, type TaskCategory } from '../../shared/simulator/tasks/task-schema';
import { generateWorld } from '../../shared/simulator/world/generate-world';
import type { TrainingFootprint } from './contamination';
import type { EvalInput, SuiteName } from './eval-contract';

export const EVAL_ITEM_SCHEMA_VERSION = 1;

const ruleCheckSchema = z
  .object({ instruction: z.string().min(1), kwargs: z.record(z.string(), z.unknown()).default({}) })
  .strict();
export type RuleCheck = z.infer<typeof ruleCheckSchema>;

/** The harness a harness_variant_qa item plays under: the canonical one, or a variant rebuilt from its seed. */
export const itemHarnessSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('canonical') }),
  z.object({
    kind: z.literal('variant'),
    /** generateVariantPool seed and weights: anyone with the canonical harness rebuilds the same variant. */
    seed: z.string().optional(),
    weights: z.partialRecord(hsaFamilySchema, z.number()).optional(),
    /** Or the variant directory an augment stage stored (a seen variant). */
    uri: z.string().optional(),
    hash: z.string(),
    families: z.array(hsaFamilySchema),
    /** Its hash is in no training manifest given. */
    heldOutVariant: z.boolean(),
    /** It applies only held-out transform operators (families excluded from training augmentation). */
    heldOutOperator: z.boolean(),
  }),
]);
export type ItemHarness = z.infer<typeof itemHarnessSchema>;

/** One eval item, as `plan` writes it to `items/<suite>.jsonl.gz`. */
export const evalItemSchema = z.discriminatedUnion('suite', [
  z.object({
    suite: z.literal('live_stream_qa'),
    id: z.string(),
    category: z.string(),
    origin: z.enum(['generated', 'imported']),
    task: taskSchema,
  }),
  z.object({
    suite: z.literal('harness_variant_qa'),
    id: z.string(),
    category: z.string(),
    taskId: z.string(),
    task: taskSchema,
    harness: itemHarnessSchema,
  }),
  z.object({
    suite: z.literal('ifeval'),
    id: z.string(),
    key: z.number().int(),
    prompt: z.string(),
    instructionIds: z.array(z.string()),
    kwargs: z.array(z.record(z.string(), z.unknown())),
  }),
  z.object({
    suite: z.literal('custom'),
    id: z.string(),
    prompt: z.string(),
    checks: z.array(ruleCheckSchema),
    rubric: z.string().optional(),
  }),
]);
export type EvalItem = z.infer<typeof evalItemSchema>;

/** A line of a custom prompt file. */
export const customPromptSchema = z
  .object({
    id: z.string().min(1),
    prompt: z.string().min(1),
    /** Rule checks from the IFEval instruction vocabulary, e.g. `{ instruction: "punctuation:no_comma" }`. */
    checks: z.array(ruleCheckSchema).default([]),
    /** What a judge should look for (needs `judge` with `custom` in its suites). */
    rubric: z.string().min(1).optional(),
  })
  .strict();

/** A local path becomes a file URI (configs may name local files); URIs stay as they are. */
export function asArtifactUri(target: string): string {
  return target.includes('://') ? target : pathToFileURL(resolve(target)).href;
}

/** Held-out simulator tasks, spread over `categories` in turn: task i depends only on (seed, i, its category). */
export function heldOutTasks(
  count: number,
  seed: string,
  categories: readonly TaskCategory[] = taskCategories,
): Task[] {
  const catalog = generateWorld({ seed: `${seed}/catalog`, itemCount: 2000 });
  return Array.from({ length: count }, (_, index) => {
    const category = categories[index % categories.length];
    return generateTask(catalog, category, new Rng(`eval-tasks/${seed}/${index}`), { kind: 'generated', seed, index });
  });
}

/** Draws of one variant before giving up. */
const variantAttempts = 8;

/** The variant an item names, rebuilt (the same bytes for the same canonical harness, seed and weights). */
export function rebuildVariant(
  canonical: Harness,
  seed: string,
  weights: FamilyWeights,
): { harness: Harness; hash: string; families: HsaFamily[] } {
  const pool = generateVariantPool(canonical, { size: 1, seed, weights, attempts: variantAttempts });
  const variant = pool.variants[0];
  if (!variant) {
    const reasons = pool.rejected
      .slice(0, 3)
      .map((rejection) => `${rejection.reason} (${rejection.families.join(', ')})`);
    throw new BadInputError(
      'EVAL_VARIANT_FAILED',
      `no valid HSA variant from seed ${seed} in ${variantAttempts} draws (${reasons.join('; ')}); check harness_variant_qa.families and the harness`,
    );
  }
  return { harness: variant.harness, hash: variant.hash, families: variant.mapping.families };
}

export interface SuiteItems {
  suite: SuiteName;
  items: EvalItem[];
  lineage: Array<{ uri: string; sha256: string }>;
}

/** Builds every suite's items (deterministic under the seed). `trainingVariants`: variant hashes seen in training. */
export async function buildSuiteItems(
  input: EvalInput,
  canonical: Harness | undefined,
  footprint: Pick<TrainingFootprint, 'variantHashes' | 'variantDirs' | 'variantFamilies'>,
  openObject: StageDeps['openObject'],
): Promise<SuiteItems[]> {
  const trainingVariants = footprint.variantHashes;
  const suites: SuiteItems[] = [];
  const live = input.suites.live_stream_qa;
  if (live) {
    const generated = heldOutTasks(live.size, live.seed, live.categories);
    const imported =
      live.tasks.length > 0
        ? await readTaskSets(
            await expandInputs(live.tasks.map(asArtifactUri), openObject, 'suites.live_stream_qa.tasks', 'tasks'),
            openObject,
          )
        : { tasks: [], lineage: [] };
    const items: EvalItem[] = [
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
    suites.push({ suite: 'live_stream_qa', items, lineage: imported.lineage });
  }
  const variantSuite = input.suites.harness_variant_qa;
  if (variantSuite) {
    if (!canonical)
      throw new HatError(
        'EVAL_NO_HARNESS',
        'harness_variant_qa needs the canonical harness; plan loads it for the episode suites, so this is a bug',
      );
    const tasks = heldOutTasks(variantSuite.size, variantSuite.seed, variantSuite.categories);
    const stored = [...footprint.variantDirs.keys()].sort();
    if (variantSuite.seenVariantsPerTask > stored.length)
      throw new BadInputError(
        'EVAL_NO_SEEN_VARIANTS',
        `suites.harness_variant_qa.seenVariantsPerTask is ${variantSuite.seenVariantsPerTask}, but the augment outputs of trainingManifests store ${stored.length} variant(s); name the augment manifest in trainingManifests or lower seenVariantsPerTask`,
      );
    const items: EvalItem[] = [];
    const heldOutWeights = Object.fromEntries(
      hsaFamilies.map((family) => [family, variantSuite.heldOutFamilies.includes(family) ? 1 : 0]),
    );
    for (const [taskIndex, task] of tasks.entries()) {
      items.push({
        suite: 'harness_variant_qa',
        id: `${task.id}/canonical`,
        category: task.category,
        taskId: task.id,
        task,
        harness: { kind: 'canonical' },
      });
      const draws: Array<{ seed: string; weights: FamilyWeights; heldOutOperator: boolean }> = Array.from(
        { length: variantSuite.variantsPerTask },
        (_, variantIndex) => ({
          seed: `${variantSuite.seed}/task-${taskIndex}/variant-${variantIndex}`,
          weights: variantSuite.families,
          heldOutOperator: false,
        }),
      );
      if (variantSuite.heldOutFamilies.length > 0)
        draws.push({
          seed: `${variantSuite.seed}/task-${taskIndex}/held-out-operator`,
          weights: heldOutWeights,
          heldOutOperator: true,
        });
      const seenRng = new Rng(`${variantSuite.seed}/task-${taskIndex}/seen`);
      for (const hash of seenRng.sample(stored, variantSuite.seenVariantsPerTask)) {
        const uri = footprint.variantDirs.get(hash) as string;
        items.push({
          suite: 'harness_variant_qa',
          id: `${task.id}/${hash.slice(0, 12)}`,
          category: task.category,
          taskId: task.id,
          task,
          harness: {
            kind: 'variant',
            uri,
            hash,
            families: (footprint.variantFamilies.get(hash) ?? []).filter((family): family is HsaFamily =>
              (hsaFamilies as readonly string[]).includes(family),
            ),
            heldOutVariant: false,
            heldOutOperator: false,
          },
        });
      }
      for (const draw of draws) {
        const variant = rebuildVariant(canonical, draw.seed, draw.weights);
        items.push({
          suite: 'harness_variant_qa',
          id: `${task.id}/${variant.hash.slice(0, 12)}`,
          category: task.category,
          taskId: task.id,
          task,
          harness: {
            kind: 'variant',
            seed: draw.seed,
            weights: draw.weights,
            hash: variant.hash,
            families: variant.families,
            heldOutVariant: !trainingVariants.has(variant.hash),
            heldOutOperator: draw.heldOutOperator,
          },
        });
      }
    }
    refuseDuplicateIds(items, 'suites.harness_variant_qa');
    suites.push({ suite: 'harness_variant_qa', items, lineage: [] });
  }
  const ifeval = input.suites.ifeval;
  if (ifeval) {
    const all = loadIfevalItems();
    let chosen = all;
    if (ifeval.keys) {
      const byKey = new Map(all.map((item) => [item.key, item]));
      const missing = ifeval.keys.filter((key) => !byKey.has(key));
      if (missing.length > 0)
        throw new BadInputError(
          'EVAL_BAD_SUITE',
          `suites.ifeval.keys: no IFEval prompt has key ${missing.slice(0, 5).join(', ')}; use keys of the shipped input_data.jsonl`,
        );
      chosen = ifeval.keys.map((key) => byKey.get(key)!);
    } else if (ifeval.size !== undefined && ifeval.size < all.length) {
      chosen = new Rng(`eval-ifeval/${ifeval.seed}`)
        .shuffle(all)
        .slice(0, ifeval.size)
        .sort((left, right) => left.key - right.key);
    }
    const items: EvalItem[] = chosen.map((item) => ({
      suite: 'ifeval',
      id: `ifeval-${item.key}`,
      key: item.key,
      prompt: item.prompt,
      instructionIds: item.instructionIds,
      kwargs: item.kwargs,
    }));
    suites.push({ suite: 'ifeval', items, lineage: [] });
  }
  const custom = input.suites.custom;
  if (custom) {
    const { records, sha256 } = await readCustomPrompts(asArtifactUri(custom.prompts), openObject);
    const judged = input.judge?.suites.includes('custom') ?? false;
    const problems = new ProblemCollector();
    records.forEach((record, index) => {
      for (const [checkIndex, check] of record.checks.entries()) {
        for (const message of validateInstructionSpec(check.instruction, check.kwargs)) {
          problems.add({ file: custom.prompts, path: `record ${index + 1}.checks.${checkIndex}`, message });
        }
      }
      if (record.checks.length === 0 && (record.rubric === undefined || !judged)) {
        problems.add({
          file: custom.prompts,
          path: `record ${index + 1}`,
          message: `prompt "${record.id}" has no rule checks${record.rubric ? ' and no judge rates custom' : ' and no rubric'}; add checks, or a rubric and judge: { suites: [custom] }`,
        });
      }
    });
    problems.throwIfAny('EVAL_BAD_CUSTOM_PROMPTS', `${custom.prompts} has problems; fix them and run again`);
    const items: EvalItem[] = records.map((record) => ({
      suite: 'custom',
      id: record.id,
      prompt: record.prompt,
      checks: record.checks,
      ...(record.rubric ? { rubric: record.rubric } : {}),
    }));
    refuseDuplicateIds(items, custom.prompts);
    suites.push({ suite: 'custom', items, lineage: [{ uri: asArtifactUri(custom.prompts), sha256 }] });
  }
  return suites;
}

async function readCustomPrompts(
  uri: string,
  openObject: StageDeps['openObject'],
): Promise<{ records: Array<z.infer<typeof customPromptSchema>>; sha256: string }> {
  const { store, key } = openObject(uri);
  if (!(await store.head(key)))
    throw new BadInputError('MISSING_INPUT', `suites.custom.prompts: ${uri} does not exist; check the path`);
  return readRecordRange(openObject, uri, customPromptSchema);
}

function refuseDuplicateIds(items: readonly EvalItem[], where: string): void {
  const seen = new Set<string>();
  for (const item of items) {
    if (seen.has(item.id))
      throw new BadInputError(
        'EVAL_DUPLICATE_ITEM',
        `${where}: item id "${item.id}" appears twice; eval item ids must be unique within a suite`,
      );
    seen.add(item.id);
  }
}

/** The text of an item a model is asked, for contamination checks and the judge. */
export function promptTextOf(item: EvalItem): string {
  if (item.suite === 'ifeval' || item.suite === 'custom') return item.prompt;
  return item.task.turns.map((turn) => turn.message).join('\n');
}
