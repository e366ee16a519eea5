import { HatError } from '../../shared/errors';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { generateVariantPool, type FamilyWeights } from '../../shared/harness/hsa/generate-variant';
import type { HsaFamily } from '../../shared/harness/hsa/variant-mapping';

/** The harness a group plays under. */
export interface GroupHarness {
  harness: Harness;
  /** Content hash of `harness`. */
  hash: string;
  canonical: boolean;
  /** Set for variants: the variant hash (names it in HSA outputs) and the families it applied. */
  variant?: { hash: string; families: HsaFamily[] };
}

/** Draws of a group's variant before giving up (each a fresh family choice). */
const variantAttempts = 8;

/**
 * A fresh HSA variant for one group, drawn from `<seed>/rl/group-<index>` only: the same group
 * gets the same variant in whatever part, attempt or process it runs, and anyone holding the
 * canonical harness, the seed and the weights can rebuild it. Draws that fail validation, change
 * nothing or leak canonical names are redrawn (the HSA pool's checks).
 */
export function groupVariant(
  canonical: Harness,
  groupIndex: number,
  seed: string,
  weights: FamilyWeights,
): GroupHarness {
  const pool = generateVariantPool(canonical, {
    size: 1,
    seed: `${seed}/rl/group-${groupIndex}`,
    weights,
    attempts: variantAttempts,
  });
  const variant = pool.variants[0];
  if (!variant) {
    const reasons = pool.rejected
      .slice(0, 3)
      .map((rejection) => `${rejection.reason} (${rejection.families.join(', ')}): ${rejection.detail.slice(0, 200)}`);
    throw new HatError(
      'RL_VARIANT_FAILED',
      `no valid HSA variant for group ${groupIndex} in ${variantAttempts} draws: ${reasons.join('; ')}; check the families weights and the harness`,
    );
  }
  return {
    harness: variant.harness,
    hash: harnessHash(variant.harness),
    canonical: false,
    variant: { hash: variant.hash, families: variant.mapping.families },
  };
}
