import { z } from 'zod';
import { toolCapabilities } from '../../harness/harness-types';
import { roomSnapshotSchema } from '../world/room-snapshot';
import { textStyles } from '../world/text-style';

export const TASK_SCHEMA_VERSION = 1;

export const taskCategories = [
  'price',
  'spec',
  'stock_size',
  'coupon_math',
  'shipping_after_sales',
  'comparison',
  'chit_chat',
  'compliance_trap',
  'multi_question',
  'multi_turn',
  'out_of_catalog',
  'after_sales_multi_turn',
] as const;
export const taskCategorySchema = z.enum(taskCategories);
export type TaskCategory = z.infer<typeof taskCategorySchema>;

/** How the viewer points at an item: the one on screen, a bag link number, a name, or the one just discussed. */
export const itemRefSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('featured') }),
  z.object({ kind: z.literal('link'), linkNo: z.number().int().positive() }),
  z.object({ kind: z.literal('name'), text: z.string().min(1) }),
  z.object({ kind: z.literal('previous') }),
]);
export type ItemRef = z.infer<typeof itemRefSchema>;

const target = { itemId: z.string().min(1), ref: itemRefSchema };

export const policyAspects = [
  'free_shipping',
  'remote',
  'dispatch',
  'returns',
  'warranty',
  'invoice',
  'special_invoice',
] as const;
export type PolicyAspect = (typeof policyAspects)[number];
export const chitChatTopics = ['greeting', 'compliment', 'is_real', 'thanks'] as const;
export const trapKinds = ['cheapest', 'lifetime', 'best'] as const;

/** What one viewer turn asks, in world terms (what the scripted expert and viewer work from). */
export const simpleIntentSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('price'), ...target }),
  z.object({ kind: z.literal('spec'), ...target, specKey: z.string().min(1) }),
  z.object({
    kind: z.literal('size'),
    ...target,
    heightCm: z.number(),
    weightKg: z.number(),
    weightUnit: z.enum(['kg', 'jin']).default('kg'),
    checkStock: z.boolean(),
  }),
  z.object({
    kind: z.literal('stock'),
    ...target,
    size: z.string().optional(),
    color: z.string().optional(),
    spec: z.string().optional(),
  }),
  z.object({
    kind: z.literal('final_price'),
    ...target,
    quantity: z.number().int().positive(),
    spec: z.string().optional(),
  }),
  z.object({ kind: z.literal('policy'), ...target, aspect: z.enum(policyAspects), region: z.string().optional() }),
  z.object({ kind: z.literal('compare'), items: z.array(z.object(target)).min(2).max(4) }),
  z.object({ kind: z.literal('chit_chat'), topic: z.enum(chitChatTopics) }),
  z.object({ kind: z.literal('trap'), ...target, trap: z.enum(trapKinds), term: z.string().min(1) }),
  z.object({ kind: z.literal('unknown_item'), query: z.string().min(1) }),
  z.object({ kind: z.literal('unknown_spec'), ...target, attribute: z.string().min(1) }),
]);
export type SimpleIntent = z.infer<typeof simpleIntentSchema>;

export const intentSchema = z.union([
  simpleIntentSchema,
  z.object({ kind: z.literal('multi'), parts: z.array(simpleIntentSchema).min(2) }),
]);
export type Intent = z.infer<typeof intentSchema>;

/**
 * A fact the reply must state. Met when the reply contains one of `values` (numbers, within
 * `tolerance`, after numeral normalization: ¥/元/块, 299.00, 二百九十九, full-width digits) or one
 * of `accepted` (phrases, normalized the same way; when `negatable`, a phrase in a clause with
 * 不/没/无/未 before it does not count).
 */
export const factSchema = z.object({
  label: z.string().min(1),
  values: z.array(z.number()).optional(),
  /** Absolute tolerance for `values`. Default 0.01. */
  tolerance: z.number().nonnegative().optional(),
  accepted: z.array(z.string().min(1)).optional(),
  negatable: z.boolean().optional(),
});
export type Fact = z.infer<typeof factSchema>;

/** A constraint on one canonical argument of a required tool call. */
export const argumentConstraintSchema = z.object({
  equals: z.union([z.string(), z.number(), z.boolean()]).optional(),
  /** Any one of these values (e.g. the SKUs of one spec in any color). */
  oneOf: z.array(z.union([z.string(), z.number()])).optional(),
  approx: z.number().optional(),
  /** Absolute tolerance for `approx`. Default 0.5. */
  tolerance: z.number().nonnegative().optional(),
  /** The argument (an array) holds at least these values. */
  includesAll: z.array(z.string()).optional(),
  /** The argument may be left out; when present it must match. */
  optional: z.boolean().optional(),
});
export type ArgumentConstraint = z.infer<typeof argumentConstraintSchema>;

export const callPatternSchema = z.object({
  capability: z.enum(toolCapabilities),
  /** Canonical argument name -> constraint (resolved through the harness binding). */
  arguments: z.record(z.string(), argumentConstraintSchema).optional(),
});
export type CallPattern = z.infer<typeof callPatternSchema>;

/** Met when every call of at least one alternative was made (in any order, in this turn). */
export const toolRequirementSchema = z.object({
  label: z.string().min(1),
  anyOf: z.array(z.array(callPatternSchema).min(1)).min(1),
});
export type ToolRequirement = z.infer<typeof toolRequirementSchema>;

export const expectationsSchema = z.object({
  facts: z.array(factSchema).default([]),
  tools: z.array(toolRequirementSchema).default([]),
  /** Terms the reply must not contain (beyond the verifier's advertising-law list). */
  forbidden: z.array(z.object({ term: z.string().min(1), reason: z.string() })).default([]),
  /** The right answer admits not knowing (out of catalog, unrecorded attribute). */
  admitUnknown: z.boolean().default(false),
});
export type Expectations = z.infer<typeof expectationsSchema>;

export const taskTurnSchema = z.object({
  /** The viewer's message (for follow-ups: the scripted default; viewers may rephrase it). */
  message: z.string().min(1),
  intent: intentSchema,
  expect: expectationsSchema,
});
export type TaskTurn = z.infer<typeof taskTurnSchema>;

export const taskSourceSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('generated'),
    seed: z.string(),
    index: z.number().int().nonnegative(),
    /** The generator's `text` when it was not `default` (absent: the default text). */
    text: z.enum(textStyles).optional(),
  }),
  z.object({
    kind: z.literal('production_log'),
    file: z.string().optional(),
    line: z.number().int().positive(),
    roomId: z.string(),
    timestamp: z.string(),
    referenceReply: z.string().optional(),
  }),
]);

/** One live-room scenario: the room as it was, what the viewer says turn by turn, and what a verifier checks. */
export const taskSchema = z.object({
  schemaVersion: z.literal(TASK_SCHEMA_VERSION),
  /** Deterministic: category plus a hash of the content. */
  id: z.string().min(1),
  category: taskCategorySchema,
  source: taskSourceSchema,
  room: roomSnapshotSchema,
  turns: z.array(taskTurnSchema).min(1),
});
export type Task = z.infer<typeof taskSchema>;
