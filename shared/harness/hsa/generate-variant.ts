import type { Problem } from '../../errors';
import { Rng } from '../../random/rng';
import { harnessHash } from '../harness-hash';
import type { Harness } from '../harness-types';
import { validateHarness } from '../load-harness';
import { defaultFamilyWeights, familiesInApplyOrder, hsaOperators } from './hsa-operators';
import { NamesExhaustedError } from './name-allocator';
import { VariantBuilder } from './variant-builder';
import { findHarnessLeaks } from './variant-checks';
import { hsaFamilies, variantHashOf, type HsaFamily, type Variant } from './variant-mapping';

/**
 * Makes HSA variants of a harness: the chosen families (the operator table, hsa-operators.ts) run
 * in their apply order on a copy of the harness (renaming families first, so content rewrites
 * see the final names), every draw comes
 * from the seeded generator, and the result is validated like a harness loaded from disk.
 */

/** Share of variants that apply each family (0..1); at least one family always applies. */
export type FamilyWeights = Partial<Record<HsaFamily, number>>;

export { defaultFamilyWeights };

/** Draws the families of one variant: each with its weight as probability, at least one (then by weight). */
export function selectFamilies(weights: FamilyWeights, rng: Rng): HsaFamily[] {
  const entries = hsaFamilies
    .map((family) => [family, Math.max(0, Math.min(1, weights[family] ?? 0))] as const)
    .filter(([, weight]) => weight > 0);
  if (entries.length === 0) throw new RangeError('selectFamilies: no family has a positive weight');
  const chosen = entries.filter(([, weight]) => rng.chance(weight)).map(([family]) => family);
  if (chosen.length === 0)
    chosen.push(
      rng.weighted(
        entries.map(([family]) => family),
        entries.map(([, weight]) => weight),
      ),
    );
  return familiesInApplyOrder.filter((family) => chosen.includes(family));
}

/** A variant that failed validation: never emitted, counted by the caller. */
export class InvalidVariantError extends Error {
  constructor(
    readonly families: HsaFamily[],
    readonly problems: Problem[],
  ) {
    super(
      `HSA variant (${families.join(', ')}) is not a valid harness: ${problems.map((problem) => `${problem.file ?? ''} ${problem.path ?? ''}: ${problem.message}`).join('; ')}`,
    );
  }
}

export interface GenerateVariantOptions {
  families: readonly HsaFamily[];
  rng: Rng;
  /** Content hash of `source` when the caller has it. */
  sourceHash?: string;
}

/** One variant of `source` with the given families; throws InvalidVariantError when the result would not load. */
export function generateVariant(source: Harness, options: GenerateVariantOptions): Variant {
  const sourceHash = options.sourceHash ?? harnessHash(source);
  const builder = new VariantBuilder(source, options.rng, sourceHash);
  try {
    for (const family of familiesInApplyOrder)
      if (options.families.includes(family)) hsaOperators[family].apply(builder);
  } catch (error) {
    if (error instanceof NamesExhaustedError)
      throw new InvalidVariantError([...options.families], [{ message: error.message }]);
    throw error;
  }
  const harness = builder.harness;
  const problems = validateHarness(harness);
  if (problems.length > 0) throw new InvalidVariantError(builder.mapping.families, problems);
  const hash = variantHashOf(harness, builder.mapping);
  harness.version = `${source.version}+hsa.${hash.slice(0, 8)}`;
  harness.meta = { hsa: { sourceHash, variantHash: hash, families: builder.mapping.families } };
  return { harness, mapping: builder.mapping, hash };
}

export interface VariantPoolOptions {
  /** Variants to make. */
  size: number;
  seed: string;
  weights?: FamilyWeights;
  /** Attempts per variant before giving up on it (each attempt a fresh draw). Default 5. */
  attempts?: number;
}

/** Why a drawn variant was not put in the pool. */
export type RejectedVariantReason = 'invalid_harness' | 'unchanged' | 'leak' | 'duplicate';

export interface VariantPool {
  variants: Variant[];
  /** Draws that were not kept (another draw replaced each), with why. */
  rejected: Array<{ families: HsaFamily[]; reason: RejectedVariantReason; detail: string }>;
}

/**
 * A pool of distinct variants, the same for the same source, seed and weights: variant `i` is
 * drawn from `seed/variant-i/attempt-j`, so the pool does not depend on how it is consumed.
 */
export function generateVariantPool(source: Harness, options: VariantPoolOptions): VariantPool {
  const sourceHash = harnessHash(source);
  const root = new Rng(options.seed).fork(`hsa/${sourceHash}`);
  const variants: Variant[] = [];
  const seen = new Set<string>();
  const rejected: VariantPool['rejected'] = [];
  for (let index = 0; index < options.size; index++) {
    for (let attempt = 0; attempt < (options.attempts ?? 5); attempt++) {
      const rng = root.fork(`variant-${index}/attempt-${attempt}`);
      const families = selectFamilies(options.weights ?? defaultFamilyWeights, rng.fork('families'));
      let variant: Variant;
      try {
        variant = generateVariant(source, { families, rng, sourceHash });
      } catch (error) {
        if (!(error instanceof InvalidVariantError)) throw error;
        rejected.push({ families: error.families, reason: 'invalid_harness', detail: error.message });
        continue;
      }
      if (variant.mapping.families.length === 0) {
        rejected.push({
          families,
          reason: 'unchanged',
          detail: `no chosen family (${families.join(', ')}) has anything to change in this harness`,
        });
        continue;
      }
      // A renamed name left anywhere in the harness would leak into every trajectory rewritten under it.
      const leaks = findHarnessLeaks(variant.harness, variant.mapping);
      if (leaks.length > 0) {
        rejected.push({
          families: variant.mapping.families,
          reason: 'leak',
          detail: leaks
            .slice(0, 3)
            .map((leak) => `${leak.kind} ${JSON.stringify(leak.name)} in ${leak.where}`)
            .join('; '),
        });
        continue;
      }
      if (seen.has(variant.hash)) {
        rejected.push({
          families: variant.mapping.families,
          reason: 'duplicate',
          detail: `same as an earlier variant (${variant.hash.slice(0, 12)})`,
        });
        continue;
      }
      seen.add(variant.hash);
      variants.push(variant);
      break;
    }
  }
  return { variants, rejected };
}
