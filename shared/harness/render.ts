import { hookBlock } from '../text/hook-messages';
import { copyJsonKeepingFloats } from '../text/python-values';
import type { ToolSpec } from '../trajectory/messages';
import type {
  Harness,
  HookCondition,
  HookConstraint,
  HookDefinition,
  HookEvent,
  PromptFormat,
  PromptSection,
  Skill,
} from './harness-types';

/**
 * What the model sees under a harness: the system prompt (sections in the harness's order and
 * format) and the tools list (bindings stripped), plus per-event hook injections. Pure and
 * deterministic: the same harness and context always give the same text.
 */

/** The live-room state a render depends on. */
export interface RenderContext {
  /** Whether a campaign is running now (hooks with `when: campaign_active`). */
  campaignActive: boolean;
  /** The coupon viewers can use now, e.g. `满300减50` (fills `{coupon}`). */
  activeCoupon?: string;
  /** The item being pushed now (fills `{featured_item}`; hooks with `when: featured_item_set`). */
  featuredItem?: string;
  /** Campaign name (fills `{campaign}`). */
  campaign?: string;
  /** Free text about the room (the simulator's snapshot), shown in the room_context section. */
  roomContext?: string;
}

export interface RenderedHarness {
  systemPrompt: string;
  /** OpenAI tools list, in harness order, without `x-hat-binding`. */
  tools: ToolSpec[];
}

/** A constraint in force, for the verifier. */
export interface ActiveConstraint {
  hookId: string;
  constraint: HookConstraint;
  /** The hook's text with placeholders filled, as the model saw it. */
  text: string;
  /** When the hook fires. */
  event: HookEvent;
  /** For `must_mention`: the text the reply must contain (the coupon, featured item or campaign). */
  mention?: string;
}

const contextPlaceholders = ['coupon', 'featured_item', 'campaign'] as const;

/** Placeholders a hook's text may use: the context values, and `{value}` unless the constraint is `none`. */
export function hookPlaceholders(constraint: HookConstraint): string[] {
  return constraint.type === 'none' ? [...contextPlaceholders] : ['value', ...contextPlaceholders];
}

function conditionHolds(when: HookCondition, context: RenderContext): boolean {
  switch (when) {
    case 'always':
      return true;
    case 'campaign_active':
      return context.campaignActive;
    case 'featured_item_set':
      return Boolean(context.featuredItem);
  }
}

function mentionValue(constraint: HookConstraint, context: RenderContext): string | undefined {
  if (constraint.type !== 'must_mention') return undefined;
  const value = {
    active_coupon: context.activeCoupon,
    featured_item: context.featuredItem,
    campaign: context.campaign,
  }[constraint.target];
  return value || undefined;
}

function constraintValue(constraint: HookConstraint, context: RenderContext): string | undefined {
  switch (constraint.type) {
    case 'max_chars':
      return String(constraint.value);
    case 'must_mention':
      return mentionValue(constraint, context);
    case 'banned_terms':
      return constraint.terms.join('、');
    case 'tone':
      return constraint.markers.join('、');
    case 'none':
      return undefined;
  }
}

/**
 * The hook's text with placeholders filled, or undefined when the hook is not in force: its
 * condition fails, or a value it needs (a placeholder, a must_mention target) is not in the
 * context, since "mention today's coupon" means nothing on a day without one.
 */
function hookTextInForce(hook: HookDefinition, context: RenderContext): string | undefined {
  if (!conditionHolds(hook.when, context)) return undefined;
  if (hook.constraint.type === 'must_mention' && mentionValue(hook.constraint, context) === undefined) return undefined;
  const values: Record<string, string | undefined> = {
    value: constraintValue(hook.constraint, context),
    coupon: context.activeCoupon || undefined,
    featured_item: context.featuredItem || undefined,
    campaign: context.campaign || undefined,
  };
  let missing = false;
  const text = hook.text.replace(/\{(value|coupon|featured_item|campaign)\}/g, (_match, name: string) => {
    const value = values[name];
    if (value === undefined) missing = true;
    return value ?? '';
  });
  return missing ? undefined : text;
}

/** Injections for one event: text appended to the user turn (placement user_suffix, and reminder_block as a marked block), extra system messages (placement system_message). system_prompt-placed hooks are part of renderHarness's constraints section. */
export function renderHookInjections(
  harness: Harness,
  event: HookEvent,
  context: RenderContext,
): { userSuffix: string; systemMessages: string[] } {
  const suffixes: string[] = [];
  const systemMessages: string[] = [];
  for (const hook of harness.hooks) {
    if (hook.event !== event || hook.placement === 'system_prompt') continue;
    const text = hookTextInForce(hook, context);
    if (text === undefined) continue;
    if (hook.placement === 'user_suffix') suffixes.push(text);
    else if (hook.placement === 'reminder_block') suffixes.push(hookBlock(text));
    else systemMessages.push(text);
  }
  // Ready to append to the user's text: empty, or starting on a new line.
  return { userSuffix: suffixes.length > 0 ? `\n${suffixes.join('\n')}` : '', systemMessages };
}

/** The constraints in force under the context (hooks whose `when` holds), with values filled in, for the verifier. Hooks with constraint `none` impose nothing and are left out. */
export function activeConstraints(harness: Harness, context: RenderContext): ActiveConstraint[] {
  const result: ActiveConstraint[] = [];
  for (const hook of harness.hooks) {
    if (hook.constraint.type === 'none') continue;
    const text = hookTextInForce(hook, context);
    if (text === undefined) continue;
    const entry: ActiveConstraint = { hookId: hook.id, constraint: hook.constraint, text, event: hook.event };
    const mention = mentionValue(hook.constraint, context);
    if (mention !== undefined) entry.mention = mention;
    result.push(entry);
  }
  return result;
}

/** One section's content before formatting: a lead-in, list items, skills, and free context text. */
interface SectionBody {
  lead: string;
  items: string[];
  skills: Skill[];
  context: string;
}

function sectionBody(section: PromptSection, harness: Harness, context: RenderContext): SectionBody {
  const body: SectionBody = { lead: section.content.trim(), items: [], skills: [], context: '' };
  switch (section.kind) {
    case 'skills':
      body.skills = harness.skills;
      break;
    case 'tools_guide':
      body.items = harness.tools.map((tool) => `${tool.name}: ${firstLine(tool.description)}`);
      break;
    case 'constraints':
      for (const hook of harness.hooks) {
        if (hook.placement !== 'system_prompt') continue;
        const text = hookTextInForce(hook, context);
        if (text !== undefined) body.items.push(text.trim());
      }
      break;
    case 'room_context':
      if (context.featuredItem) body.items.push(`featured_item: ${context.featuredItem}`);
      if (context.campaignActive && context.campaign) body.items.push(`campaign: ${context.campaign}`);
      if (context.activeCoupon) body.items.push(`coupon: ${context.activeCoupon}`);
      body.context = context.roomContext?.trim() ?? '';
      if (body.items.length === 0 && body.context === '') body.context = '(none)';
      break;
    default:
      break;
  }
  return body;
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0];
}

function toolList(skill: Skill): string {
  return skill.tools.length > 0 ? skill.tools.join(', ') : '(none)';
}

function indent(text: string, spaces: number): string {
  const pad = ' '.repeat(spaces);
  return text
    .split('\n')
    .map((line) => (line.trim() === '' ? '' : `${pad}${line}`))
    .join('\n');
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function nonEmpty(parts: string[]): string[] {
  return parts.filter((part) => part !== '');
}

type SectionFormatter = (section: PromptSection, body: SectionBody, position: number) => string;

const formatters: Record<Exclude<PromptFormat, 'json'>, SectionFormatter> = {
  markdown: (section, body) => {
    const skills = body.skills.map((skill) =>
      [
        `### ${skill.name}`,
        `- id: ${skill.id}`,
        `- description: ${skill.description}`,
        `- tools: ${toolList(skill)}`,
        '',
        skill.body.trim(),
      ].join('\n'),
    );
    const items = body.items.map((item) => `- ${item}`).join('\n');
    return nonEmpty([`## ${section.title}`, body.lead, items, ...skills, body.context]).join('\n\n');
  },
  xml: (section, body) => {
    const skills = body.skills.map((skill) =>
      [
        `<skill id="${escapeAttribute(skill.id)}" name="${escapeAttribute(skill.name)}">`,
        `<description>${skill.description}</description>`,
        `<tools>${toolList(skill)}</tools>`,
        '<instructions>',
        skill.body.trim(),
        '</instructions>',
        '</skill>',
      ].join('\n'),
    );
    const items = body.items.map((item) => `<item>${item}</item>`);
    const inner = nonEmpty([body.lead, ...items, ...skills, body.context]).join('\n');
    return `<${section.id} title="${escapeAttribute(section.title)}">\n${inner}\n</${section.id}>`;
  },
  numbered: (section, body, position) => {
    let entry = 0;
    const number = () => `${position}.${++entry}`;
    const items = body.items.map((item) => indent(`${number()} ${item}`, 3));
    const skills = body.skills.map((skill) =>
      [
        indent(`${number()} ${skill.name} (id: ${skill.id})`, 3),
        indent([`description: ${skill.description}`, `tools: ${toolList(skill)}`, skill.body.trim()].join('\n'), 7),
      ].join('\n'),
    );
    return nonEmpty([
      `${position}. ${section.title}`,
      indent(body.lead, 3),
      ...items,
      ...skills,
      indent(body.context, 3),
    ]).join('\n');
  },
};

function renderJson(sections: Array<{ section: PromptSection; body: SectionBody }>): string {
  const value = {
    sections: sections.map(({ section, body }) => {
      const entry: Record<string, unknown> = { id: section.id, title: section.title, content: body.lead };
      if (body.items.length > 0) entry.items = body.items;
      if (body.skills.length > 0) {
        entry.skills = body.skills.map((skill) => ({
          id: skill.id,
          name: skill.name,
          description: skill.description,
          tools: skill.tools,
          instructions: skill.body.trim(),
        }));
      }
      if (body.context !== '') entry.context = body.context;
      return entry;
    }),
  };
  return JSON.stringify(value, null, 2);
}

/** The system prompt the model sees under `harness` in `context` (renderHarness without the tools list, for callers that render many prompts). */
export function renderSystemPrompt(harness: Harness, context: RenderContext): string {
  const sections = harness.prompt.sections.map((section) => ({
    section,
    body: sectionBody(section, harness, context),
  }));
  const format = harness.prompt.format;
  return format === 'json'
    ? renderJson(sections)
    : sections.map(({ section, body }, index) => formatters[format](section, body, index + 1)).join('\n\n');
}

/** The tools list the model sees under `harness`, a fresh copy (callers may change it). */
function renderTools(harness: Harness): ToolSpec[] {
  return harness.tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: copyJsonKeepingFloats(tool.parameters) },
  }));
}

/** The system prompt and tools the model sees under `harness` in `context`. */
export function renderHarness(harness: Harness, context: RenderContext): RenderedHarness {
  return { systemPrompt: renderSystemPrompt(harness, context), tools: renderTools(harness) };
}

const sharedTools = new WeakMap<Harness['tools'], ToolSpec[]>();

/**
 * renderHarness for callers that treat the result as immutable (the simulator's agent loop):
 * the tools list does not depend on the context, so it is built once per harness tools list and
 * shared, and only the system prompt is rendered per call.
 */
export function renderHarnessShared(harness: Harness, context: RenderContext): RenderedHarness {
  let tools = sharedTools.get(harness.tools);
  if (tools === undefined) sharedTools.set(harness.tools, (tools = renderTools(harness)));
  return { systemPrompt: renderSystemPrompt(harness, context), tools };
}
