import { elementIdPattern } from '../harness-schema';
import type { HookConstraint, HookDefinition, HookEvent, HookPlacement } from '../harness-types';
import { paraphraseChinese } from './chinese-lexicon';
import { renameCandidates, styleName, type NamingStyle } from './name-allocator';
import type { TextRename } from './text-renamer';
import type { VariantBuilder } from './variant-builder';
import type { HsaOperator } from './hsa-operator';

/**
 * hooks: renames hook ids, moves where a constraint is injected (the system prompt's
 * constraints section, a suffix of the user turn, a system message; at session start, per user
 * message or before the reply), rephrases the constraint text, and sometimes changes a
 * `max_chars` value. A changed value is recorded in the mapping: a trajectory is only rewritten
 * under it when its recorded replies still meet it (otherwise it goes to the relabel list).
 */

type Slot = { event: HookEvent; placement: HookPlacement };

/** Where a constraint the reply must meet can be shown and still be seen before the reply. */
const constraintSlots: readonly Slot[] = [
  { event: 'session_start', placement: 'system_prompt' },
  { event: 'session_start', placement: 'system_message' },
  { event: 'user_message', placement: 'user_suffix' },
  { event: 'user_message', placement: 'system_message' },
  { event: 'before_reply', placement: 'user_suffix' },
  { event: 'before_reply', placement: 'system_message' },
  // The form system messages take for templates that accept them only first (Qwen3.5): training sees what serving sends.
  { event: 'user_message', placement: 'reminder_block' },
  { event: 'before_reply', placement: 'reminder_block' },
];

/** Same-meaning wordings per constraint type; placeholders as the renderer fills them. */
const templates: Record<HookConstraint['type'], readonly string[]> = {
  max_chars: [
    '回复请控制在{value}个字以内。',
    '注意：每条回复最多{value}个字，先说结论。',
    '（字数上限：{value}字）',
    '直播节奏快，回复务必不超过{value}个字。',
  ],
  must_mention: ['本条回复务必自然地提到"{value}"。', '回复里需要提一句"{value}"。', '提醒：这条回复要带上"{value}"。'],
  banned_terms: [
    '回复中不得使用以下说法：{value}。',
    '禁用词（《广告法》）：{value}；改用有依据的表达。',
    '不要说{value}这类绝对化用语。',
  ],
  tone: [
    '每条回复至少用一个称呼（{value}）。',
    '称呼观众时用{value}之一，语气亲切。',
    '保持主播语气：回复里要有{value}中的一个称呼。',
  ],
  none: [],
};

const idStyles: readonly NamingStyle[] = ['snake', 'camel', 'synonym_snake', 'opaque'];

export function applyHooks(builder: VariantBuilder): void {
  const { harness, rng } = builder;
  if (harness.hooks.length === 0) return;
  const hasConstraintsSection = harness.prompt.sections.some((section) => section.kind === 'constraints');
  const constraintsContent =
    harness.prompt.sections.find((section) => section.kind === 'constraints')?.content.trim() ?? '';
  const canonicalOf = new Map(Object.entries(builder.mapping.hooks).map(([canonical, entry]) => [entry.id, canonical]));
  const renameIds = rng.chance(0.7);
  const ids = builder.allocator((name) => elementIdPattern.test(name));
  const idStyle = rng.pick(idStyles);
  const renames: TextRename[] = [];
  const protect = builder.protectedPhrases();
  let changed = false;

  for (const hook of harness.hooks) {
    const canonical = canonicalOf.get(hook.id) ?? hook.id;
    const entry = builder.mapping.hooks[canonical];
    if (entry === undefined) continue;
    if (rng.chance(0.5))
      changed = moveHook(hook, harness.hooks, hasConstraintsSection, constraintsContent, rng) || changed;
    if (rng.chance(0.6)) {
      const text = rephrase(hook, rng, protect);
      if (text !== hook.text) {
        hook.text = text;
        entry.textChanged = true;
        changed = true;
      }
    }
    if (hook.constraint.type === 'max_chars' && rng.chance(0.3)) {
      const before = hook.constraint;
      const value = Math.max(10, Math.round(before.value * rng.pick([0.67, 0.8, 1.25, 1.5])));
      if (value !== before.value) {
        hook.constraint = { type: 'max_chars', value };
        entry.constraint = { before, after: hook.constraint };
        changed = true;
      }
    }
    if ((renameIds || !changed) && builder.renameable(hook.id)) {
      const id = ids.allocate(renameCandidates(hook.id, idStyle, 'hook', rng), () =>
        styleName(hook.id, 'opaque', 'hook', rng),
      );
      renames.push({ from: hook.id, to: id, kind: 'hook_id', scope: 'harness' });
      hook.id = id;
      changed = true;
    }
    entry.id = hook.id;
    entry.after = { event: hook.event, placement: hook.placement };
  }
  builder.rename(renames);
  builder.markFamily('hooks');
}

/** Moves a hook to another slot it may take; returns whether it moved. */
function moveHook(
  hook: HookDefinition,
  hooks: HookDefinition[],
  hasConstraintsSection: boolean,
  constraintsContent: string,
  rng: VariantBuilder['rng'],
): boolean {
  // An after_tool_result hook speaks about tool results: it stays where results arrive, as a
  // system message after them or a reminder block at the end of the last one.
  if (hook.event === 'after_tool_result') {
    if (hook.placement === 'system_prompt') return false;
    hook.placement = hook.placement === 'reminder_block' ? 'system_message' : 'reminder_block';
    return true;
  }
  const promptHooks = hooks.filter((other) => other.placement === 'system_prompt');
  // The constraints section must keep something to show, or the harness would fail validation.
  const lastInSection = hook.placement === 'system_prompt' && promptHooks.length === 1 && constraintsContent === '';
  const slots = constraintSlots.filter(
    (slot) =>
      !(slot.event === hook.event && slot.placement === hook.placement) &&
      (slot.placement !== 'system_prompt' || hasConstraintsSection) &&
      (hook.placement !== 'system_prompt' || !lastInSection),
  );
  if (slots.length === 0) return false;
  const slot = rng.pick(slots);
  hook.event = slot.event;
  hook.placement = slot.placement;
  return true;
}

function rephrase(hook: HookDefinition, rng: VariantBuilder['rng'], protect: string[]): string {
  const options = templates[hook.constraint.type].filter((template) =>
    placeholdersOf(template).every((name) => placeholdersOf(hook.text).includes(name) || name === 'value'),
  );
  // A tone hook needing more than one marker, or a hook whose text says more than its constraint, keeps its own words (paraphrased).
  const templated =
    options.length > 0 &&
    rng.chance(0.5) &&
    !(hook.constraint.type === 'tone' && (hook.constraint.minMarkers ?? 1) > 1);
  if (templated) return rng.pick(options);
  return paraphraseChinese(hook.text, rng, 0.6, protect);
}

function placeholdersOf(text: string): string[] {
  return [...text.matchAll(/\{([A-Za-z_]+)\}/g)].map((match) => match[1]);
}

/** The hooks family as an entry of the operator table (hsa-operators.ts). */
export const hooksOperator: HsaOperator = {
  family: 'hooks',
  summary: 'hook renames, injection placement, rephrased constraints, value changes the recorded reply still satisfies',
  applyRank: 3,
  defaultWeight: 0.6,
  apply: applyHooks,
};
