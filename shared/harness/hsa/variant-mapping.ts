import { z } from 'zod';
import { hashValue } from '../../hash/hash';
import { harnessHash } from '../harness-hash';
import { hookConstraintSchema } from '../harness-schema';
import { hookEvents, hookPlacements, promptFormats, type Harness } from '../harness-types';
import { parseParameters, unitsOf } from './tool-layout';

/**
 * What an HSA variant changed, per family, in terms a trajectory can be rewritten with (forward:
 * canonical -> variant) and checked against (backward). Written beside each variant harness as
 * `mapping.json`.
 */

export const hsaFamilies = ['skill_ids', 'skill_content', 'tool_schemas', 'prompt_structure', 'hooks'] as const;
export type HsaFamily = (typeof hsaFamilies)[number];
export const hsaFamilySchema = z.enum(hsaFamilies);

export const VARIANT_MAPPING_SCHEMA_VERSION = 1;

const textRenameSchema = z.object({
  from: z.string(),
  to: z.string(),
  kind: z.enum(['tool', 'parameter', 'enum_value', 'skill_id', 'skill_name', 'section_id', 'section_title', 'hook_id']),
  scope: z.enum(['entity', 'harness']),
});

export const toolMappingSchema = z.object({
  /** The tool's name in the variant. */
  name: z.string(),
  /** Canonical parameter path -> variant path, for every path a call can carry (dot-separated). */
  parameters: z.record(z.string(), z.string()),
  /** Canonical parameter path -> { canonical value: variant value } for respelled enum values. */
  enumValues: z.record(z.string(), z.record(z.string(), z.string())),
});
export type ToolMapping = z.infer<typeof toolMappingSchema>;

const placementSchema = z.object({ event: z.enum(hookEvents), placement: z.enum(hookPlacements) });

export const hookMappingSchema = z.object({
  /** The hook's id in the variant. */
  id: z.string(),
  before: placementSchema,
  after: placementSchema,
  textChanged: z.boolean(),
  /** Set when the variant changed what the constraint demands (then recorded replies are re-checked). */
  constraint: z.object({ before: hookConstraintSchema, after: hookConstraintSchema }).optional(),
});
export type HookMapping = z.infer<typeof hookMappingSchema>;

export const variantMappingSchema = z.object({
  schemaVersion: z.literal(VARIANT_MAPPING_SCHEMA_VERSION),
  /** Families applied, in the order they ran. */
  families: z.array(hsaFamilySchema),
  /** Content hash of the canonical harness the variant was made from. */
  sourceHash: z.string(),
  /** By canonical tool name. */
  tools: z.record(z.string(), toolMappingSchema),
  /** Distractor tools (variant names): no canonical counterpart, never in a rewritten call. */
  addedTools: z.array(z.string()),
  /** Variant tool name -> distractor parameter paths (optional, ignored by the binding). */
  addedParameters: z.record(z.string(), z.array(z.string())),
  /** By canonical skill id. */
  skills: z.record(z.string(), z.object({ id: z.string(), name: z.string() })),
  /** Distractor skills (variant ids). */
  addedSkills: z.array(z.string()),
  /** By canonical hook id. */
  hooks: z.record(z.string(), hookMappingSchema),
  prompt: z.object({
    format: z.object({ before: z.enum(promptFormats), after: z.enum(promptFormats) }),
    /** Sections in variant order, each with its canonical id. */
    sections: z.array(z.object({ canonicalId: z.string(), id: z.string(), title: z.string() })),
  }),
  /** Every substitution applied to free text, in the order applied. */
  renames: z.array(textRenameSchema),
});
export type VariantMapping = z.infer<typeof variantMappingSchema>;

/** An HSA variant: the rewritten harness and how it maps from the canonical one. */
export interface Variant {
  harness: Harness;
  mapping: VariantMapping;
  /** sha256 of (variant harness content hash, mapping): names the variant and its directory. */
  hash: string;
}

export function variantHashOf(harness: Harness, mapping: VariantMapping): string {
  return hashValue({ harness: harnessHash(harness), mapping });
}

/** The mapping of a harness to itself (the start of every variant). */
export function identityMapping(harness: Harness, sourceHash = harnessHash(harness)): VariantMapping {
  return {
    schemaVersion: VARIANT_MAPPING_SCHEMA_VERSION,
    families: [],
    sourceHash,
    tools: Object.fromEntries(
      harness.tools.map((tool) => [
        tool.name,
        {
          name: tool.name,
          parameters: Object.fromEntries(unitsOf(parseParameters(tool)).map(({ path }) => [path, path])),
          enumValues: {},
        },
      ]),
    ),
    addedTools: [],
    addedParameters: {},
    skills: Object.fromEntries(harness.skills.map((skill) => [skill.id, { id: skill.id, name: skill.name }])),
    addedSkills: [],
    hooks: Object.fromEntries(
      harness.hooks.map((hook) => [
        hook.id,
        {
          id: hook.id,
          before: { event: hook.event, placement: hook.placement },
          after: { event: hook.event, placement: hook.placement },
          textChanged: false,
        },
      ]),
    ),
    prompt: {
      format: { before: harness.prompt.format, after: harness.prompt.format },
      sections: harness.prompt.sections.map((section) => ({
        canonicalId: section.id,
        id: section.id,
        title: section.title,
      })),
    },
    renames: [],
  };
}
