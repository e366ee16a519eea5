import type { VariantBuilder } from './variant-builder';
import type { HsaFamily } from './variant-mapping';

/**
 * One HSA operator family: how it rewrites a harness, where it runs among the others, and how
 * often a variant applies it by default. Each family's file exports one; `hsa-operators.ts` is
 * the table of them (docs/contributing/hsa-operator.md walks through adding one).
 */
export interface HsaOperator {
  family: HsaFamily;
  /** What the family changes, in one line (shown in docs and reports). */
  summary: string;
  /**
   * Position among the families a variant applies (lower first). Renaming families run before
   * content rewrites, so the rewrites see the final names.
   */
  applyRank: number;
  /** Share of variants that apply it when the config gives no weights (0..1). */
  defaultWeight: number;
  /** Rewrites the builder's harness copy and records what changed in its mapping. */
  apply(builder: VariantBuilder): void;
}
