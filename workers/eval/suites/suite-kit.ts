import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { BadInputError } from '../../../shared/errors';
import { HatError, errorCodeOf } from '../../../shared/errors';
import type { Harness } from '../../../shared/harness/harness-types';
import { generateVariantPool, type FamilyWeights } from '../../../shared/harness/hsa/generate-variant';
import { hsaFamilySchema, type HsaFamily } from '../../../shared/harness/hsa/variant-mapping';
import { Rng } from '../../../shared/random/rng';
import { runEpisode } from '../../../shared/simulator/agent-loop';
import {
  defaultMixCategories,
  generateTask,
  type ReferenceShares,
} from '../../../shared/simulator/tasks/generate-tasks';
import type { Task, TaskCategory } from '../../../shared/simulator/tasks/task-schema';
import { generateWorld } from '../../../shared/simulator/world/generate-world';
import type { TextStyle } from '../../../shared/simulator/world/text-style';
import type { Trajectory } from '../../../shared/trajectory/trajectory';
import { bootstrapMean, type Interval } from '../bootstrap-interval';
import type { EvalResult } from '../eval-part';
import type { PreparedHarness, SuiteItem, SuiteItemContext } from './eval-suite';

/** What the built-in suites share: seeded tasks and variants, single-prompt and episode answering, grouping. */

/** A local path becomes a file URI (configs may name local files); URIs stay as they are. */
export function asArtifactUri(target: string): string {
  return target.includes('://') ? target : pathToFileURL(resolve(target)).href;
}

export const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);
export const uriList = z.union([
  z
    .string()
    .min(1)
    .transform((uri) => [uri]),
  z.array(z.string().min(1)),
]);

export const ruleCheckSchema = z
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

/**
 * Held-out simulator tasks, spread over `categories` in turn: task i depends only on (seed, i, its
 * category, references, text).
 */
export function heldOutTasks(
  count: number,
  seed: string,
  categories: readonly TaskCategory[] = defaultMixCategories,
  references?: ReferenceShares,
  text: TextStyle = 'default',
): Task[] {
  const catalog = generateWorld({ seed: `${seed}/catalog`, itemCount: 2000, text });
  return Array.from({ length: count }, (_, index) => {
    const category = categories[index % categories.length];
    const source = { kind: 'generated' as const, seed, index, ...(text !== 'default' ? { text } : {}) };
    return generateTask(catalog, category, new Rng(`eval-tasks/${seed}/${index}`), source, references, text);
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

export function refuseDuplicateIds(items: readonly SuiteItem[], where: string): void {
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

export const compareText = (left: string, right: string) => (left < right ? -1 : left > right ? 1 : 0);

export function group<T>(values: readonly T[], keyOf: (value: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const value of values) {
    const key = keyOf(value);
    if (key === undefined) continue;
    const list = groups.get(key) ?? [];
    list.push(value);
    groups.set(key, list);
  }
  return new Map([...groups.entries()].sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0)));
}

export const scoreOf = (result: EvalResult): number => result.score ?? 0;

export function intervals(groups: Map<string, EvalResult[]>, samples: number, seed: string): Record<string, Interval> {
  return Object.fromEntries(
    [...groups].map(([key, list]) => [key, bootstrapMean(list.map(scoreOf), samples, `${seed}/${key}`)]),
  );
}

function finalReplies(trajectory: Trajectory): string {
  const replies: string[] = [];
  for (const message of trajectory.messages) {
    if (message.role === 'assistant' && (message.tool_calls?.length ?? 0) === 0 && message.content)
      replies.push(message.content);
  }
  return replies.join('\n');
}

/**
 * Plays one simulator task as a full agent episode under the item's harness and scores it by the
 * verifier (reward × 100). An episode the endpoint broke scores 0: the model under test did not answer.
 */
export async function playEpisode(
  task: Task,
  context: SuiteItemContext,
  fields: Partial<EvalResult>,
): Promise<EvalResult> {
  const { part, samplingSeed, signal, base } = context;
  const harness = context.harness as PreparedHarness;
  const trajectory = await runEpisode({
    policy: context.client,
    harness: harness.harness,
    harnessHash: harness.hash,
    ...(harness.variant ? { variant: harness.variant } : {}),
    task,
    maxSteps: part.config.maxStepsPerTurn,
    sampling: { ...part.model.sampling, seed: samplingSeed },
    seed: `${part.seed}/eval/${part.model.label}/${base.itemId}`,
    signal,
  });
  const failed = trajectory.status === 'model_error' || trajectory.status === 'timeout';
  return {
    ...base,
    ...fields,
    response: finalReplies(trajectory),
    status: trajectory.status,
    ...(trajectory.statusReason ? { error: trajectory.statusReason } : {}),
    score: failed ? 0 : trajectory.reward.total * 100,
    components: failed
      ? Object.fromEntries(Object.keys(trajectory.reward.components).map((key) => [key, 0]))
      : { ...trajectory.reward.components },
    checks: [],
    latencyMs: trajectory.calls.reduce((sum, call) => sum + call.e2eMs, 0),
    calls: trajectory.calls.length,
    usage: {
      promptTokens: trajectory.calls.reduce((sum, call) => sum + call.promptTokens, 0),
      completionTokens: trajectory.calls.reduce((sum, call) => sum + call.completionTokens, 0),
    },
  };
}

/**
 * Asks one single-turn prompt. Returns the answer, or the failed item's result: every check it
 * carries failed (it stays in every denominator, #33), score 0 (null when it carries no check and
 * `nullWithoutChecks`: a judge-only item).
 */
export async function askPrompt(
  prompt: string,
  context: SuiteItemContext,
  options: {
    maxTokens: number | undefined;
    failedChecks: Array<{ name: string; strict: boolean; loose: boolean }>;
    nullWithoutChecks?: boolean;
  },
): Promise<
  { ok: true; response: string; latencyMs: number; usage: EvalResult['usage'] } | { ok: false; result: EvalResult }
> {
  const { part, samplingSeed, signal } = context;
  try {
    const answer = await context.client.chat({
      messages: [{ role: 'user', content: prompt }],
      ...part.model.sampling,
      ...(options.maxTokens ? { maxTokens: options.maxTokens } : {}),
      seed: samplingSeed,
      signal,
    });
    return {
      ok: true,
      response: answer.message.content ?? '',
      latencyMs: answer.timings.e2eMs,
      usage: { promptTokens: answer.usage.promptTokens, completionTokens: answer.usage.completionTokens },
    };
  } catch (error) {
    // Bad config is the operator's to fix, not a model error to score.
    if (HatError.isInstance(error) && !error.retryable && errorCodeOf(error) === 'MODEL_BAD_CONFIG') throw error;
    // An aborted job rethrows after this item (see the part loop); an item deadline is a timeout.
    const status = signal.aborted ? 'timeout' : 'model_error';
    const failed = options.failedChecks;
    return {
      ok: false,
      result: {
        ...context.base,
        response: '',
        status,
        error: (error as Error).message,
        score: options.nullWithoutChecks && failed.length === 0 ? null : 0,
        checks: failed,
        ...(failed.length > 0 ? { followedStrict: false, followedLoose: false } : {}),
        latencyMs: 0,
        calls: 1,
        usage: { promptTokens: 0, completionTokens: 0 },
      },
    };
  }
}

/** Standard error of a mean (sample standard deviation / √n), as lm-evaluation-harness reports it; 0 under two values. */
export function meanStderr(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const average = values.reduce((sum, value) => sum + value, 0) / values.length;
  const variance = values.reduce((sum, value) => sum + (value - average) ** 2, 0) / (values.length - 1);
  return Math.sqrt(variance / values.length);
}
