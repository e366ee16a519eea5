import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { sha256Hex } from '../../shared/hash/hash';
import type { Harness } from '../../shared/harness/harness-types';
import type { TrainingFootprint } from './contamination';
import type { EvalInput } from './eval-contract';
import type { SuiteItem } from './suites/eval-suite';
import { evalSuiteOf, evalSuites, findEvalSuite, type BuiltInEvalItem } from './suites/registry';

export { asArtifactUri, heldOutTasks, rebuildVariant, itemHarnessSchema, ruleCheckSchema } from './suites/suite-kit';
export type { ItemHarness, RuleCheck } from './suites/suite-kit';
export { customPromptSchema } from './suites/custom';

export const EVAL_ITEM_SCHEMA_VERSION = 1;

/** One eval item, as `plan` writes it to `items/<suite>.jsonl.gz`: the built-in suites' item types. */
export type EvalItem = BuiltInEvalItem;

/** Any registered suite's item, parsed by that suite's `itemSchema`. */
export const evalItemSchema = z.looseObject({ suite: z.string(), id: z.string() }).transform((item, context) => {
  const suite = findEvalSuite(item.suite);
  if (!suite) {
    context.addIssue({ code: 'custom', path: ['suite'], message: `"${item.suite}" is not an eval suite` });
    return z.NEVER;
  }
  const parsed = suite.itemSchema.safeParse(item);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      context.addIssue({ code: 'custom', path: issue.path, message: issue.message });
    return z.NEVER;
  }
  return parsed.data;
}) as unknown as z.ZodType<EvalItem>;

export interface SuiteItems {
  suite: string;
  /** Typed as the built-in items (what callers narrow on `suite`); a registered suite's are its own `SuiteItem`s. */
  items: EvalItem[];
  lineage: Array<{ uri: string; sha256: string }>;
  /** The suite's version and the sha256 of its data (a shipped or given file, else the built items). */
  version: number;
  data: { source: string; sha256: string };
}

/**
 * Builds the items of every suite the config names, in registry order (deterministic under the
 * seed). `footprint`: what training saw (variant hashes, stored variants).
 */
export async function buildSuiteItems(
  input: EvalInput,
  canonical: Harness | undefined,
  footprint: Pick<TrainingFootprint, 'variantHashes' | 'variantDirs' | 'variantFamilies'>,
  openObject: StageDeps['openObject'],
): Promise<SuiteItems[]> {
  const configs = input.suites as Record<string, unknown>;
  const built: SuiteItems[] = [];
  for (const suite of evalSuites()) {
    const config = configs[suite.name];
    if (config === undefined) continue;
    const { items, lineage, data } = await suite.buildItems(config, { input, canonical, footprint, openObject });
    built.push({
      suite: suite.name,
      items: items as EvalItem[],
      lineage,
      version: suite.version,
      // Generated items: the hash of the item set itself (tasks, variants, prompts), one JSON line each.
      data: data ?? {
        source: 'generated items',
        sha256: sha256Hex(items.map((item) => JSON.stringify(item)).join('\n')),
      },
    });
  }
  return built;
}

/** The text of an item a model is asked, for contamination checks and the judge. */
export function promptTextOf(item: SuiteItem): string {
  return evalSuiteOf(item.suite).promptText(item);
}
