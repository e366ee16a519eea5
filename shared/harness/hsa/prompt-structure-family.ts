import { elementIdPattern } from '../harness-schema';
import { promptFormats, type SectionKind } from '../harness-types';
import { paraphraseChinese } from './chinese-lexicon';
import { renameCandidates, styleName, type NamingStyle } from './name-allocator';
import { renamesInText, type TextRename } from './text-renamer';
import type { VariantBuilder } from './variant-builder';
import type { HsaOperator } from './hsa-operator';

/**
 * prompt_structure: reorders the system prompt's sections (which moves where skills and
 * constraints appear), changes the delimiters (markdown, xml, numbered, json), retitles and
 * renames sections (with every reference to a title rewritten), and varies the persona wording.
 */

/** Titles with the same meaning per section kind. */
const titlesByKind: Record<SectionKind, readonly string[]> = {
  persona: ['角色设定', '你的身份', '主播人设'],
  rules: ['行为准则', '总体要求', '基本要求'],
  skills: ['技能清单', '可用技能', '能力列表'],
  tools_guide: ['工具说明', '工具调用指南', '如何使用工具'],
  constraints: ['硬性约束', '运营约束', '强制要求'],
  room_context: ['直播间状态', '当前直播信息', '实时房间信息'],
  text: ['补充说明', '其他说明', '附加信息'],
};

const idStyles: readonly NamingStyle[] = ['snake', 'camel', 'synonym_snake', 'opaque'];

export function applyPromptStructure(builder: VariantBuilder): void {
  const { harness, rng } = builder;
  const sections = harness.prompt.sections;
  const changes = {
    reorder: sections.length > 1 && rng.chance(0.7),
    format: rng.chance(0.6),
    titles: rng.chance(0.6),
    ids: rng.chance(0.4),
    persona: rng.chance(0.5),
  };
  if (!Object.values(changes).some(Boolean)) changes.format = true;

  if (changes.reorder) harness.prompt.sections = rng.shuffle(sections);
  if (changes.format)
    harness.prompt.format = rng.pick(promptFormats.filter((format) => format !== harness.prompt.format));

  const renames: TextRename[] = [];
  const canonicalOf = new Map(builder.mapping.prompt.sections.map((entry) => [entry.id, entry.canonicalId]));
  const titles = builder.allocator();
  const ids = builder.allocator((name) => elementIdPattern.test(name));
  const idStyle = rng.pick(idStyles);
  const canonicalIds = harness.prompt.sections.map((section) => canonicalOf.get(section.id) ?? section.id);
  for (const section of harness.prompt.sections) {
    if (changes.titles && builder.renameable(section.title)) {
      const title = titles.allocate(
        rng.shuffle(titlesByKind[section.kind]),
        () => `${rng.pick(Object.values(titlesByKind).flat())}（${rng.int(2, 99)}）`,
      );
      // A short title cannot be renamed safely in free text; references to it (if any) keep the old spelling, so keep the old title too.
      if (renamesInText(section.title)) {
        renames.push({ from: section.title, to: title, kind: 'section_title', scope: 'harness' });
        section.title = title;
      } else if (!harnessMentions(builder, section.title)) {
        section.title = title;
      }
    }
    if (changes.ids && builder.renameable(section.id)) {
      const id = ids.allocate(renameCandidates(section.id, idStyle, 'section', rng), () =>
        styleName(section.id, 'opaque', 'section', rng),
      );
      renames.push({ from: section.id, to: id, kind: 'section_id', scope: 'harness' });
      section.id = id;
    }
  }
  builder.rename(renames);

  if (changes.persona) {
    const protect = builder.protectedPhrases();
    for (const section of harness.prompt.sections) {
      if (section.kind === 'persona' || section.kind === 'rules')
        section.content = paraphraseChinese(section.content, rng, 0.5, protect);
    }
  }
  builder.mapping.prompt = {
    format: { before: builder.mapping.prompt.format.before, after: harness.prompt.format },
    sections: harness.prompt.sections.map((section, index) => ({
      canonicalId: canonicalIds[index],
      id: section.id,
      title: section.title,
    })),
  };
  builder.markFamily('prompt_structure');
}

/** Whether any free text of the harness other than titles mentions the phrase. */
function harnessMentions(builder: VariantBuilder, phrase: string): boolean {
  const { harness } = builder;
  const texts = [
    ...harness.prompt.sections.map((section) => section.content),
    ...harness.skills.flatMap((skill) => [skill.description, skill.body]),
    ...harness.tools.map((tool) => tool.description),
    ...harness.hooks.map((hook) => hook.text),
  ];
  return texts.some((text) => text.includes(phrase));
}

/** The prompt_structure family as an entry of the operator table (hsa-operators.ts). */
export const promptStructureOperator: HsaOperator = {
  family: 'prompt_structure',
  summary: 'system prompt section order, delimiters (markdown, xml, numbered, json), titles, persona wording',
  applyRank: 2,
  defaultWeight: 0.6,
  apply: applyPromptStructure,
};
