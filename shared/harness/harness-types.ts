/**
 * The in-memory harness model: what `loadHarness(dir)` returns and what HSA transforms rewrite.
 * A harness on disk is a directory: `harness.yaml`, `skills/<id>.md`, `tools/<name>.json`.
 */

/** JSON Schema object (validated with ajv at load time). */
export type JsonSchema = Record<string, unknown>;

/** Simulator capabilities a tool can be bound to (see shared/simulator). */
export const toolCapabilities = [
  'item_detail',
  'item_search',
  'sku_stock',
  'promotions',
  'policy',
  'size_recommendation',
  'item_comparison',
  'live_script',
  'price_quote',
] as const;
export type ToolCapability = (typeof toolCapabilities)[number];

/**
 * Canonical argument names of each capability: what a tool's arguments map onto (by identity,
 * or through `ToolBinding.arguments`). The sample harness uses exactly these names.
 */
export const capabilityArguments = {
  item_detail: ['item_id'],
  item_search: ['query', 'category', 'max_price', 'limit'],
  sku_stock: ['item_id', 'size', 'color'],
  promotions: ['item_id'],
  policy: ['topic', 'item_id'],
  size_recommendation: ['item_id', 'height_cm', 'weight_kg'],
  item_comparison: ['item_ids'],
  live_script: [],
  price_quote: ['item_id', 'quantity', 'sku_id'],
} as const satisfies Record<ToolCapability, readonly string[]>;

/** Canonical enum values of capability arguments that take a closed set (respelled via `ToolBinding.enumValues`). */
export const capabilityArgumentEnums: Partial<Record<ToolCapability, Record<string, readonly string[]>>> = {
  item_search: { category: ['apparel', 'beauty', 'food', 'electronics', 'home'] },
  policy: { topic: ['shipping', 'returns', 'warranty', 'invoice'] },
};

export interface ToolBinding {
  /** Which simulator capability executes this tool. */
  capability: ToolCapability;
  /**
   * How this tool's argument paths map onto the capability's canonical argument names
   * (`{"query.text": "query"}` for a wrapped argument). Absent: names are identical.
   */
  arguments?: Record<string, string>;
  /** Enum respellings: canonical argument name -> { variant value: canonical value }. */
  enumValues?: Record<string, Record<string, string>>;
  /**
   * Parameter paths the tool accepts that no capability argument reads (HSA distractor
   * parameters): the loader accepts them without a mapping, and execution ignores their values.
   */
  ignoredArguments?: string[];
}

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: JsonSchema;
  /** Not model-visible. Stored in the tool file as `x-hat-binding`. */
  binding: ToolBinding;
}

export interface Skill {
  id: string;
  name: string;
  description: string;
  /** Tool names this skill uses (must exist). */
  tools: string[];
  /** Markdown instructions. */
  body: string;
}

/** When a hook fires. */
export const hookEvents = ['session_start', 'user_message', 'before_reply', 'after_tool_result'] as const;
export type HookEvent = (typeof hookEvents)[number];

/**
 * Where a hook's text is injected. `reminder_block`: appended to the user turn (or, after tool
 * results, to the last result) inside a `<system-reminder>` block, the form a `system_message`
 * hook takes for templates that accept system messages only first (shared/text/hook-messages.ts).
 */
export const hookPlacements = ['system_prompt', 'user_suffix', 'system_message', 'reminder_block'] as const;
export type HookPlacement = (typeof hookPlacements)[number];

/** Constraint kinds, in the order of the `HookConstraint` union. */
export const hookConstraintTypes = ['max_chars', 'must_mention', 'banned_terms', 'tone', 'none'] as const;

/** What a `must_mention` constraint can point at (a value of the render context). */
export const mentionTargets = ['active_coupon', 'featured_item', 'campaign'] as const;

/** Machine-checkable constraint a hook imposes; the verifier checks these. */
export type HookConstraint =
  | { type: 'max_chars'; value: number }
  | { type: 'must_mention'; target: 'active_coupon' | 'featured_item' | 'campaign' }
  | { type: 'banned_terms'; terms: string[] }
  | { type: 'tone'; markers: string[]; minMarkers?: number }
  | { type: 'none' };

/** Conditions under which a hook is active. */
export type HookCondition = 'always' | 'campaign_active' | 'featured_item_set';
export const hookConditions = [
  'always',
  'campaign_active',
  'featured_item_set',
] as const satisfies readonly HookCondition[];

export interface HookDefinition {
  id: string;
  event: HookEvent;
  placement: HookPlacement;
  when: HookCondition;
  /** Text injected; `{value}`, `{coupon}`, `{featured_item}`, `{campaign}` are filled at render time. */
  text: string;
  constraint: HookConstraint;
  /** Skill ids this hook relates to (must exist). */
  skills?: string[];
}

/** Section kinds of the system prompt. `skills` lists skills, `tools_guide` mentions tools, `constraints` gathers system_prompt hooks. */
export const sectionKinds = [
  'persona',
  'rules',
  'skills',
  'tools_guide',
  'constraints',
  'room_context',
  'text',
] as const;
export type SectionKind = (typeof sectionKinds)[number];

export interface PromptSection {
  id: string;
  kind: SectionKind;
  title: string;
  /** Body text (Markdown); for `skills`/`constraints`/`room_context` the renderer generates the body, this is a lead-in. */
  content: string;
}

/** How sections are delimited in the system prompt. */
export const promptFormats = ['markdown', 'xml', 'numbered', 'json'] as const;
export type PromptFormat = (typeof promptFormats)[number];

export interface Harness {
  id: string;
  version: string;
  /** Persona display name (the host's name), used in tone checks. */
  persona: { name: string; style: string };
  prompt: { format: PromptFormat; sections: PromptSection[] };
  skills: Skill[];
  tools: ToolDefinition[];
  hooks: HookDefinition[];
  /** Free-form metadata (variant lineage etc.). Not model-visible. */
  meta?: Record<string, unknown>;
}
