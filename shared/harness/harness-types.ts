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

/** Where a hook's text is injected. */
export const hookPlacements = ['system_prompt', 'user_suffix', 'system_message'] as const;
export type HookPlacement = (typeof hookPlacements)[number];

/** Machine-checkable constraint a hook imposes; the verifier checks these. */
export type HookConstraint =
  | { type: 'max_chars'; value: number }
  | { type: 'must_mention'; target: 'active_coupon' | 'featured_item' | 'campaign' }
  | { type: 'banned_terms'; terms: string[] }
  | { type: 'tone'; markers: string[]; minMarkers?: number }
  | { type: 'none' };

/** Conditions under which a hook is active. */
export type HookCondition = 'always' | 'campaign_active' | 'featured_item_set';

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
export const sectionKinds = ['persona', 'rules', 'skills', 'tools_guide', 'constraints', 'room_context', 'text'] as const;
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
