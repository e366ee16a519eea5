import type { Rng } from '../../random/rng';
import { capabilityArguments, type Harness } from '../harness-types';
import { harnessHash } from '../harness-hash';
import { copyJsonKeepingFloats } from '../../text/python-values';
import { NameAllocator } from './name-allocator';
import { TextRenamer, type TextRename } from './text-renamer';
import { enumValuesOf, mapSchemaDescriptions, nodesOf, parseParameters, schemaDescriptions } from './tool-layout';
import { identityMapping, type HsaFamily, type VariantMapping } from './variant-mapping';

/** A piece of harness-authored, model-visible free text, with where it lives. */
export interface HarnessText {
  where: string;
  text: string;
}

/** Every free text of a harness the model reads (section titles and content, skills, tool and parameter descriptions, hook text). */
export function harnessTexts(harness: Harness): HarnessText[] {
  const texts: HarnessText[] = [];
  for (const section of harness.prompt.sections) {
    texts.push({ where: `harness.yaml prompt.sections.${section.id}.title`, text: section.title });
    texts.push({ where: `harness.yaml prompt.sections.${section.id}.content`, text: section.content });
  }
  for (const skill of harness.skills) {
    texts.push({ where: `skills/${skill.id}.md name`, text: skill.name });
    texts.push({ where: `skills/${skill.id}.md description`, text: skill.description });
    texts.push({ where: `skills/${skill.id}.md body`, text: skill.body });
  }
  for (const tool of harness.tools) {
    texts.push({ where: `tools/${tool.name}.json description`, text: tool.description });
    for (const text of schemaDescriptions(tool.parameters))
      texts.push({ where: `tools/${tool.name}.json parameter description`, text });
  }
  for (const hook of harness.hooks) texts.push({ where: `harness.yaml hooks.${hook.id}.text`, text: hook.text });
  return texts;
}

/** Applies `map` to every free text of a harness (the fields harnessTexts lists), in place. */
export function mapHarnessTexts(harness: Harness, map: (text: string) => string): void {
  for (const section of harness.prompt.sections) {
    section.title = map(section.title);
    section.content = map(section.content);
  }
  for (const skill of harness.skills) {
    skill.name = map(skill.name);
    skill.description = map(skill.description);
    skill.body = map(skill.body);
  }
  for (const tool of harness.tools) {
    tool.description = map(tool.description);
    tool.parameters = mapSchemaDescriptions(tool.parameters, map);
  }
  for (const hook of harness.hooks) hook.text = map(hook.text);
}

/** The names of a harness by namespace (tools, parameters, enum values, skill ids and names, section ids and titles, hook ids). */
function namesByNamespace(harness: Harness): Record<string, Set<string>> {
  const namespaces: Record<string, Set<string>> = {
    tool: new Set(),
    parameter: new Set(),
    enum: new Set(),
    skill: new Set(),
    skillName: new Set(),
    section: new Set(),
    title: new Set(),
    hook: new Set(),
  };
  for (const tool of harness.tools) {
    namespaces.tool?.add(tool.name);
    for (const node of nodesOf(parseParameters(tool))) {
      namespaces.parameter?.add(node.name);
      for (const value of enumValuesOf(node.schema)) namespaces.enum?.add(value);
    }
  }
  for (const skill of harness.skills) {
    namespaces.skill?.add(skill.id);
    namespaces.skillName?.add(skill.name);
  }
  for (const section of harness.prompt.sections) {
    namespaces.section?.add(section.id);
    namespaces.title?.add(section.title);
  }
  for (const hook of harness.hooks) namespaces.hook?.add(hook.id);
  return namespaces;
}

/** Every name a harness gives something (and every capability argument name): new names must differ from all of them. */
export function harnessNames(harness: Harness): string[] {
  const names = new Set<string>();
  for (const namespace of Object.values(namesByNamespace(harness))) for (const name of namespace) names.add(name);
  for (const argumentsOfCapability of Object.values(capabilityArguments))
    for (const name of argumentsOfCapability) names.add(name);
  return [...names];
}

/**
 * Names two different things share (a skill id that is also a parameter name): free text that
 * mentions one cannot be told from text that mentions the other, so neither is renamed.
 */
export function ambiguousNames(harness: Harness): Set<string> {
  const seen = new Map<string, number>();
  for (const namespace of Object.values(namesByNamespace(harness)))
    for (const name of namespace) seen.set(name, (seen.get(name) ?? 0) + 1);
  return new Set([...seen].filter(([, count]) => count > 1).map(([name]) => name));
}

/**
 * The working state of one variant while families run: a copy of the harness being rewritten
 * and the mapping recorded so far. Renames go through `rename`, which rewrites every free text
 * at once, so a later family always sees one consistent harness.
 */
export class VariantBuilder {
  readonly harness: Harness;
  readonly mapping: VariantMapping;
  /** Names of the canonical harness (new names must avoid them). */
  readonly sourceNames: string[];
  /** Names shared by two kinds of thing in the canonical harness: never renamed. */
  readonly ambiguous: Set<string>;
  /** Every name handed out so far, by any family (shared by all allocators). */
  private readonly claimed = new Set<string>();

  constructor(
    readonly source: Harness,
    readonly rng: Rng,
    sourceHash = harnessHash(source),
  ) {
    // Tool schemas may hold floats kept as Python reads them, which structuredClone would turn into objects.
    this.harness = copyJsonKeepingFloats(source);
    delete this.harness.meta;
    this.mapping = identityMapping(source, sourceHash);
    this.sourceNames = harnessNames(source);
    this.ambiguous = ambiguousNames(source);
  }

  /** A name allocator that avoids the canonical names, `extraOldNames`, and every name already handed out in this variant. */
  allocator(valid?: (name: string) => boolean, extraOldNames: Iterable<string> = []): NameAllocator {
    return new NameAllocator([...this.sourceNames, ...extraOldNames], valid, this.claimed);
  }

  /** Whether a canonical name may be renamed (it names one thing only). */
  renameable(name: string): boolean {
    return !this.ambiguous.has(name);
  }

  /** Records renames and applies them to every free text of the harness. */
  rename(renames: TextRename[]): void {
    const effective = renames.filter((rename) => rename.from !== rename.to);
    if (effective.length === 0) return;
    this.mapping.renames.push(...effective);
    const renamer = new TextRenamer(effective);
    if (renamer.size > 0) mapHarnessTexts(this.harness, (text) => renamer.apply(text));
  }

  /** Phrases paraphrasing must leave intact: names other text refers to. */
  protectedPhrases(): string[] {
    return [
      this.harness.persona.name,
      ...this.harness.skills.map((skill) => skill.name),
      ...this.harness.prompt.sections.map((section) => section.title),
      ...this.harness.hooks.flatMap((hook) =>
        hook.constraint.type === 'banned_terms'
          ? hook.constraint.terms
          : hook.constraint.type === 'tone'
            ? hook.constraint.markers
            : [],
      ),
    ];
  }

  markFamily(family: HsaFamily): void {
    if (!this.mapping.families.includes(family)) this.mapping.families.push(family);
  }
}
