import type { HsaOperator } from './hsa-operator';
import { hooksOperator } from './hooks-family';
import { promptStructureOperator } from './prompt-structure-family';
import { skillContentOperator } from './skill-content-family';
import { skillIdsOperator } from './skill-ids-family';
import { toolSchemasOperator } from './tool-schemas-family';
import { hsaFamilies, type HsaFamily } from './variant-mapping';

/**
 * The table of HSA operator families, one entry per family file. The family names (and the
 * order weights are drawn in) are `hsaFamilies` in variant-mapping.ts; the type makes this table
 * and that list agree.
 */
export const hsaOperators: Readonly<Record<HsaFamily, HsaOperator>> = {
  skill_ids: skillIdsOperator,
  skill_content: skillContentOperator,
  tool_schemas: toolSchemasOperator,
  prompt_structure: promptStructureOperator,
  hooks: hooksOperator,
};

/** The families in the order a variant applies them. */
export const familiesInApplyOrder: readonly HsaFamily[] = [...hsaFamilies].sort(
  (a, b) => hsaOperators[a].applyRank - hsaOperators[b].applyRank,
);

/** Each family's default share of variants. */
export const defaultFamilyWeights: Readonly<Record<HsaFamily, number>> = Object.fromEntries(
  hsaFamilies.map((family) => [family, hsaOperators[family].defaultWeight]),
) as Record<HsaFamily, number>;
