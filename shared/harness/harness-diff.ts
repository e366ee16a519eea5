import { canonicalJson } from '../hash/hash';
import { harnessHash } from './harness-hash';
import type {
  Harness,
  HookConstraint,
  HookDefinition,
  HookEvent,
  HookPlacement,
  PromptFormat,
  PromptSection,
  Skill,
  ToolDefinition,
} from './harness-types';
import { schemaPropertyPaths, type SchemaProperty } from './json-schema-check';
import { stringifyJsonKeepingFloats } from '../text/python-values';

/**
 * Semantic diff of two harnesses: what an operator (or an HSA variant) changed, in the terms of
 * the harness (a tool renamed, a parameter's type changed, a hook moved to another event), not
 * as text lines. Entries missing by name on one side are paired as renames when they are
 * similar enough (for tools: the same capability and mostly the same canonical arguments).
 */

export interface FieldChange<T> {
  before: T;
  after: T;
}

export interface Rename {
  from: string;
  to: string;
}

/** A change to an entry present on both sides: `id` is its name after, `previousId` its name before when renamed. */
export interface EntryChange {
  id: string;
  previousId?: string;
}

export interface FamilyDiff<Change extends EntryChange> {
  added: string[];
  removed: string[];
  renamed: Rename[];
  /** Entries present on both sides with changes beyond a rename. */
  changed: Change[];
  /** Set when entries present on both sides appear in another relative order (names as on each side). */
  reordered?: FieldChange<string[]>;
}

export type ParameterChange =
  | { kind: 'added' | 'removed'; path: string; type: string }
  | { kind: 'renamed'; from: string; to: string }
  | { kind: 'type_changed'; path: string; before: string; after: string }
  | { kind: 'required_changed'; path: string; before: boolean; after: boolean }
  | { kind: 'enum_changed'; path: string; before: string[]; after: string[] }
  | { kind: 'description_changed'; path: string }
  /** Schema keywords outside named properties changed (`additionalProperties`, root constraints...). */
  | { kind: 'schema_changed' };

export interface ToolChange extends EntryChange {
  descriptionChanged: boolean;
  capability?: FieldChange<string>;
  /** Argument mapping or enum respellings changed (not model-visible, changes execution). */
  bindingChanged: boolean;
  parameters: ParameterChange[];
}

export interface SkillChange extends EntryChange {
  /** Changed fields; `tools` compares names after applying tool renames. */
  fields: Array<'name' | 'description' | 'tools' | 'body'>;
}

export interface HookChange extends EntryChange {
  moved?: FieldChange<{ event: HookEvent; placement: HookPlacement }>;
  when?: FieldChange<string>;
  constraint?: FieldChange<HookConstraint>;
  textChanged: boolean;
  /** Related skills changed (after applying skill renames). */
  skillsChanged: boolean;
}

export interface SectionChange extends EntryChange {
  fields: Array<'kind' | 'title' | 'content'>;
}

export interface HarnessDiff {
  before: { id: string; version: string; hash: string };
  after: { id: string; version: string; hash: string };
  /** Same content hash: nothing the model sees or the simulator executes differs. */
  identical: boolean;
  persona: Array<'name' | 'style'>;
  format?: FieldChange<PromptFormat>;
  sections: FamilyDiff<SectionChange>;
  tools: FamilyDiff<ToolChange>;
  skills: FamilyDiff<SkillChange>;
  hooks: FamilyDiff<HookChange>;
}

interface Pairing<T> {
  pairs: Array<{ before: T; after: T }>;
  added: T[];
  removed: T[];
}

/**
 * Pairs entries by name, then pairs what is left by similarity (best first, ties by position)
 * when the score reaches `threshold`: those are renames.
 */
function pairEntries<T>(
  before: T[],
  after: T[],
  key: (item: T) => string,
  similarity: (a: T, b: T) => number,
  threshold: number,
): Pairing<T> {
  const afterByKey = new Map(after.map((item) => [key(item), item]));
  const pairs: Array<{ before: T; after: T }> = [];
  const pairedAfter = new Set<T>();
  const leftBefore: T[] = [];
  for (const item of before) {
    const match = afterByKey.get(key(item));
    if (match !== undefined && !pairedAfter.has(match)) {
      pairs.push({ before: item, after: match });
      pairedAfter.add(match);
    } else {
      leftBefore.push(item);
    }
  }
  const leftAfter = after.filter((item) => !pairedAfter.has(item));
  const candidates: Array<{ score: number; i: number; j: number }> = [];
  leftBefore.forEach((a, i) =>
    leftAfter.forEach((b, j) => {
      const score = similarity(a, b);
      if (score >= threshold) candidates.push({ score, i, j });
    }),
  );
  candidates.sort((x, y) => y.score - x.score || x.i - y.i || x.j - y.j);
  const usedBefore = new Set<number>();
  const usedAfter = new Set<number>();
  for (const { i, j } of candidates) {
    if (usedBefore.has(i) || usedAfter.has(j)) continue;
    usedBefore.add(i);
    usedAfter.add(j);
    pairs.push({ before: leftBefore[i], after: leftAfter[j] });
  }
  return {
    pairs,
    removed: leftBefore.filter((_, i) => !usedBefore.has(i)),
    added: leftAfter.filter((_, j) => !usedAfter.has(j)),
  };
}

function familyDiff<T, Change extends EntryChange>(
  before: T[],
  after: T[],
  key: (item: T) => string,
  pairing: Pairing<T>,
  compare: (a: T, b: T) => Omit<Change, 'id' | 'previousId'> | undefined,
): FamilyDiff<Change> {
  const diff: FamilyDiff<Change> = {
    added: pairing.added.map(key),
    removed: pairing.removed.map(key),
    renamed: [],
    changed: [],
  };
  const renameOf = new Map<T, T>();
  for (const { before: a, after: b } of pairing.pairs) {
    renameOf.set(a, b);
    const renamed = key(a) !== key(b);
    if (renamed) diff.renamed.push({ from: key(a), to: key(b) });
    const change = compare(a, b);
    if (change) diff.changed.push({ ...change, id: key(b), ...(renamed ? { previousId: key(a) } : {}) } as Change);
  }
  // Relative order of the entries on both sides, compared in the after names.
  const beforeOrder = before.filter((item) => renameOf.has(item)).map((item) => key(renameOf.get(item) as T));
  const common = new Set(beforeOrder);
  const afterOrder = after.map(key).filter((name) => common.has(name));
  if (beforeOrder.join('\u0000') !== afterOrder.join('\u0000'))
    diff.reordered = { before: before.map(key), after: after.map(key) };
  return diff;
}

function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const item of a) if (b.has(item)) shared++;
  return shared / (a.size + b.size - shared);
}

function typeOf(schema: Record<string, unknown>): string {
  const type = schema.type;
  if (Array.isArray(type)) return type.join('|');
  if (typeof type === 'string') return type;
  return ['anyOf', 'oneOf', 'allOf'].find((keyword) => keyword in schema) ?? 'any';
}

/** A parameter with the capability argument it feeds (its own path when unmapped). */
interface BoundParameter extends SchemaProperty {
  argument: string;
}

function boundParameters(tool: ToolDefinition): BoundParameter[] {
  const mapped = tool.binding.arguments ?? {};
  return schemaPropertyPaths(tool.parameters).map((property) => ({
    ...property,
    argument: mapped[property.path] ?? property.path,
  }));
}

function toolArguments(tool: ToolDefinition): Set<string> {
  const mapped = new Set(Object.values(tool.binding.arguments ?? {}));
  const paths = Object.keys(tool.binding.arguments ?? {});
  for (const name of Object.keys(tool.parameters.properties ?? {})) {
    if (!paths.some((path) => path === name || path.startsWith(`${name}.`) || path.startsWith(`${name}[]`)))
      mapped.add(name);
  }
  return mapped;
}

function toolSimilarity(a: ToolDefinition, b: ToolDefinition): number {
  if (a.binding.capability !== b.binding.capability) return 0;
  return 0.5 + 0.5 * jaccard(toolArguments(a), toolArguments(b));
}

function enumOf(schema: Record<string, unknown>): string[] | undefined {
  // A float kept as Python reads it prints as written (`1.0`), not as an object.
  return Array.isArray(schema.enum)
    ? schema.enum.map((value) => (typeof value === 'string' ? value : stringifyJsonKeepingFloats(value)))
    : undefined;
}

function diffParameters(a: ToolDefinition, b: ToolDefinition): ParameterChange[] {
  const before = boundParameters(a);
  const after = boundParameters(b);
  // Bound arguments pair first (a rename keeps the argument), then equal paths, then look-alikes.
  const byArgument = pairEntries(
    before,
    after,
    (parameter) => parameter.argument,
    () => 0,
    1,
  );
  const byPath = pairEntries(
    byArgument.removed,
    byArgument.added,
    (parameter) => parameter.path,
    (x, y) => {
      const sameType = typeOf(x.schema) === typeOf(y.schema);
      const sameText = x.schema.description !== undefined && x.schema.description === y.schema.description;
      const sameEnum =
        enumOf(x.schema) !== undefined && canonicalJson(enumOf(x.schema)) === canonicalJson(enumOf(y.schema));
      return sameType && (sameText || sameEnum) ? 1 : 0;
    },
    1,
  );
  const changes: ParameterChange[] = [];
  for (const { before: x, after: y } of [...byArgument.pairs, ...byPath.pairs]) {
    if (x.path !== y.path) changes.push({ kind: 'renamed', from: x.path, to: y.path });
    if (typeOf(x.schema) !== typeOf(y.schema))
      changes.push({ kind: 'type_changed', path: y.path, before: typeOf(x.schema), after: typeOf(y.schema) });
    if (x.required !== y.required)
      changes.push({ kind: 'required_changed', path: y.path, before: x.required, after: y.required });
    if (canonicalJson(enumOf(x.schema) ?? null) !== canonicalJson(enumOf(y.schema) ?? null)) {
      changes.push({
        kind: 'enum_changed',
        path: y.path,
        before: enumOf(x.schema) ?? [],
        after: enumOf(y.schema) ?? [],
      });
    }
    if (x.schema.description !== y.schema.description) changes.push({ kind: 'description_changed', path: y.path });
  }
  for (const parameter of byPath.removed)
    changes.push({ kind: 'removed', path: parameter.path, type: typeOf(parameter.schema) });
  for (const parameter of byPath.added)
    changes.push({ kind: 'added', path: parameter.path, type: typeOf(parameter.schema) });
  return changes;
}

function compareTools(a: ToolDefinition, b: ToolDefinition): Omit<ToolChange, 'id' | 'previousId'> | undefined {
  const parameters = diffParameters(a, b);
  const change: Omit<ToolChange, 'id' | 'previousId'> = {
    descriptionChanged: a.description !== b.description,
    bindingChanged:
      canonicalJson({ arguments: a.binding.arguments ?? {}, enumValues: a.binding.enumValues ?? {} }) !==
      canonicalJson({ arguments: b.binding.arguments ?? {}, enumValues: b.binding.enumValues ?? {} }),
    parameters,
  };
  if (a.binding.capability !== b.binding.capability)
    change.capability = { before: a.binding.capability, after: b.binding.capability };
  if (parameters.length === 0 && canonicalJson(a.parameters) !== canonicalJson(b.parameters))
    parameters.push({ kind: 'schema_changed' });
  const changed =
    change.descriptionChanged || change.bindingChanged || change.capability !== undefined || parameters.length > 0;
  return changed ? change : undefined;
}

function fractionEqual(pairs: Array<[unknown, unknown]>): number {
  return pairs.filter(([x, y]) => canonicalJson(x) === canonicalJson(y)).length / pairs.length;
}

function renameMap(renames: Rename[]): (name: string) => string {
  const map = new Map(renames.map((rename) => [rename.from, rename.to]));
  return (name) => map.get(name) ?? name;
}

function diffSkills(before: Skill[], after: Skill[], toolName: (name: string) => string): FamilyDiff<SkillChange> {
  const tools = (skill: Skill) => skill.tools.map(toolName);
  const similarity = (a: Skill, b: Skill) =>
    fractionEqual([
      [a.name, b.name],
      [a.description, b.description],
      [a.body, b.body],
      [tools(a), b.tools],
    ]);
  const pairing = pairEntries(before, after, (skill) => skill.id, similarity, 0.5);
  return familyDiff<Skill, SkillChange>(
    before,
    after,
    (skill) => skill.id,
    pairing,
    (a, b) => {
      const fields: SkillChange['fields'] = [];
      if (a.name !== b.name) fields.push('name');
      if (a.description !== b.description) fields.push('description');
      if (canonicalJson(tools(a)) !== canonicalJson(b.tools)) fields.push('tools');
      if (a.body !== b.body) fields.push('body');
      return fields.length > 0 ? { fields } : undefined;
    },
  );
}

function diffHooks(
  before: HookDefinition[],
  after: HookDefinition[],
  skillId: (id: string) => string,
): FamilyDiff<HookChange> {
  // The text, or a real constraint at the same spot, identifies a hook; sharing `none` says nothing.
  const similarity = (a: HookDefinition, b: HookDefinition) =>
    5 * Number(a.text === b.text) +
    3 * Number(a.constraint.type !== 'none' && canonicalJson(a.constraint) === canonicalJson(b.constraint)) +
    Number(a.event === b.event) +
    Number(a.placement === b.placement);
  const pairing = pairEntries(before, after, (hook) => hook.id, similarity, 5);
  return familyDiff<HookDefinition, HookChange>(
    before,
    after,
    (hook) => hook.id,
    pairing,
    (a, b) => {
      const change: Omit<HookChange, 'id' | 'previousId'> = {
        textChanged: a.text !== b.text,
        skillsChanged: canonicalJson((a.skills ?? []).map(skillId)) !== canonicalJson(b.skills ?? []),
      };
      if (a.event !== b.event || a.placement !== b.placement) {
        change.moved = {
          before: { event: a.event, placement: a.placement },
          after: { event: b.event, placement: b.placement },
        };
      }
      if (a.when !== b.when) change.when = { before: a.when, after: b.when };
      if (canonicalJson(a.constraint) !== canonicalJson(b.constraint))
        change.constraint = { before: a.constraint, after: b.constraint };
      const changed = change.textChanged || change.skillsChanged || change.moved || change.when || change.constraint;
      return changed ? change : undefined;
    },
  );
}

const generatedSectionKinds = new Set(['skills', 'constraints', 'room_context']);

function diffSections(before: PromptSection[], after: PromptSection[]): FamilyDiff<SectionChange> {
  const similarity = (a: PromptSection, b: PromptSection) => {
    if (a.kind !== b.kind) return 0;
    // A harness has one section of each generated kind: the kind alone identifies it.
    if (generatedSectionKinds.has(a.kind)) return 1;
    return 0.5 + 0.25 * Number(a.title === b.title) + 0.25 * Number(a.content === b.content);
  };
  const pairing = pairEntries(before, after, (section) => section.id, similarity, 0.75);
  return familyDiff<PromptSection, SectionChange>(
    before,
    after,
    (section) => section.id,
    pairing,
    (a, b) => {
      const fields: SectionChange['fields'] = [];
      if (a.kind !== b.kind) fields.push('kind');
      if (a.title !== b.title) fields.push('title');
      if (a.content !== b.content) fields.push('content');
      return fields.length > 0 ? { fields } : undefined;
    },
  );
}

/** The semantic diff from `before` to `after`. */
export function diffHarnesses(before: Harness, after: Harness): HarnessDiff {
  const toolPairing = pairEntries(before.tools, after.tools, (tool) => tool.name, toolSimilarity, 0.75);
  const tools = familyDiff<ToolDefinition, ToolChange>(
    before.tools,
    after.tools,
    (tool) => tool.name,
    toolPairing,
    compareTools,
  );
  const skills = diffSkills(before.skills, after.skills, renameMap(tools.renamed));
  const hooks = diffHooks(before.hooks, after.hooks, renameMap(skills.renamed));
  const beforeHash = harnessHash(before);
  const afterHash = harnessHash(after);
  const persona: HarnessDiff['persona'] = [];
  if (before.persona.name !== after.persona.name) persona.push('name');
  if (before.persona.style !== after.persona.style) persona.push('style');
  const diff: HarnessDiff = {
    before: { id: before.id, version: before.version, hash: beforeHash },
    after: { id: after.id, version: after.version, hash: afterHash },
    identical: beforeHash === afterHash,
    persona,
    sections: diffSections(before.prompt.sections, after.prompt.sections),
    tools,
    skills,
    hooks,
  };
  if (before.prompt.format !== after.prompt.format)
    diff.format = { before: before.prompt.format, after: after.prompt.format };
  return diff;
}

export function describeConstraint(constraint: HookConstraint): string {
  switch (constraint.type) {
    case 'max_chars':
      return `max_chars ${constraint.value}`;
    case 'must_mention':
      return `must_mention ${constraint.target}`;
    case 'banned_terms':
      return `banned_terms [${constraint.terms.join(', ')}]`;
    case 'tone':
      return `tone [${constraint.markers.join(', ')}]${constraint.minMarkers !== undefined ? ` min ${constraint.minMarkers}` : ''}`;
    case 'none':
      return 'none';
  }
}

function describeParameter(change: ParameterChange): string {
  switch (change.kind) {
    case 'added':
      return `+ parameter ${change.path} (${change.type})`;
    case 'removed':
      return `- parameter ${change.path} (${change.type})`;
    case 'renamed':
      return `parameter ${change.from} -> ${change.to} (renamed)`;
    case 'type_changed':
      return `parameter ${change.path}: type ${change.before} -> ${change.after}`;
    case 'required_changed':
      return `parameter ${change.path}: ${change.before ? 'required' : 'optional'} -> ${change.after ? 'required' : 'optional'}`;
    case 'enum_changed':
      return `parameter ${change.path}: enum [${change.before.join(', ')}] -> [${change.after.join(', ')}]`;
    case 'description_changed':
      return `parameter ${change.path}: description changed`;
    case 'schema_changed':
      return 'parameters schema changed';
  }
}

function toolDetails(change: ToolChange): string[] {
  const lines: string[] = [];
  if (change.capability) lines.push(`capability ${change.capability.before} -> ${change.capability.after}`);
  if (change.descriptionChanged) lines.push('description changed');
  if (change.bindingChanged) lines.push('binding changed');
  lines.push(...change.parameters.map(describeParameter));
  return lines;
}

function hookDetails(change: HookChange): string[] {
  const lines: string[] = [];
  if (change.moved) {
    const { before, after } = change.moved;
    lines.push(`moved: ${before.event}/${before.placement} -> ${after.event}/${after.placement}`);
  }
  if (change.when) lines.push(`when: ${change.when.before} -> ${change.when.after}`);
  if (change.constraint)
    lines.push(
      `constraint: ${describeConstraint(change.constraint.before)} -> ${describeConstraint(change.constraint.after)}`,
    );
  if (change.textChanged) lines.push('text changed');
  if (change.skillsChanged) lines.push('skills changed');
  return lines;
}

function familyLines<Change extends EntryChange>(
  noun: string,
  family: FamilyDiff<Change>,
  details: (change: Change) => string[],
): string[] {
  const lines: string[] = [];
  for (const name of family.added) lines.push(`  + ${noun} ${name}`);
  for (const name of family.removed) lines.push(`  - ${noun} ${name}`);
  const changes = new Map(family.changed.map((change) => [change.id, change]));
  for (const rename of family.renamed) {
    lines.push(`  ~ ${noun} ${rename.from} -> ${rename.to} (renamed)`);
    const change = changes.get(rename.to);
    if (change) lines.push(...details(change).map((line) => `      ${line}`));
  }
  for (const change of family.changed) {
    if (change.previousId !== undefined) continue;
    lines.push(`  ~ ${noun} ${change.id}`);
    lines.push(...details(change).map((line) => `      ${line}`));
  }
  if (family.reordered)
    lines.push(`  order: ${family.reordered.before.join(', ')} -> ${family.reordered.after.join(', ')}`);
  return lines;
}

function titled(title: string, lines: string[]): string[] {
  return lines.length > 0 ? [title, ...lines] : [];
}

/** Text rendering of a diff, one change per line, grouped by family. */
export function formatHarnessDiff(diff: HarnessDiff): string {
  const side = (label: string, value: HarnessDiff['before']) =>
    `${label} ${value.id} ${value.version} (${value.hash.slice(0, 12)})`;
  const lines = [side('---', diff.before), side('+++', diff.after)];
  const prompt: string[] = [];
  if (diff.persona.length > 0) prompt.push(`  persona ${diff.persona.join(', ')} changed`);
  if (diff.format) prompt.push(`  format: ${diff.format.before} -> ${diff.format.after}`);
  const fieldsChanged = (change: SectionChange | SkillChange) => [`${change.fields.join(', ')} changed`];
  lines.push(...titled('prompt', [...prompt, ...familyLines('section', diff.sections, fieldsChanged)]));
  lines.push(...titled('tools', familyLines('tool', diff.tools, toolDetails)));
  lines.push(...titled('skills', familyLines('skill', diff.skills, fieldsChanged)));
  lines.push(...titled('hooks', familyLines('hook', diff.hooks, hookDetails)));
  if (lines.length === 2)
    lines.push(diff.identical ? 'no differences' : 'no semantic differences (content hash differs)');
  return `${lines.join('\n')}\n`;
}
