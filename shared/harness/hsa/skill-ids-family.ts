import { skillIdPattern } from '../harness-schema';
import { renameCandidates, styleName, type NamingStyle } from './name-allocator';
import { MIN_PHRASE_LENGTH, type TextRename } from './text-renamer';
import type { VariantBuilder } from './variant-builder';
import type { HsaOperator } from './hsa-operator';

/**
 * skill_ids: renames skill ids (snake, camel, kebab, descriptive synonyms, opaque codes like
 * `SK-7f3a`) and skill names (Chinese synonyms that keep what the skill is for, or a neutral
 * numbered label), and every reference to them: hooks' `skills`, and mentions in prompt text,
 * skill bodies, descriptions and hook text.
 */

const idStyles: readonly NamingStyle[] = ['snake', 'camel', 'kebab', 'synonym_snake', 'synonym_camel', 'opaque'];

/** Chinese skill names with the same meaning (none contains the name it replaces). */
const skillNameSynonyms: Record<string, readonly string[]> = {
  售后答疑: ['售后咨询', '售后问题解答', '售后服务'],
  合规表达: ['合规话术', '用语合规', '合规用语检查'],
  互动闲聊: ['聊天互动', '弹幕互动', '氛围互动'],
  到手价计算: ['到手价核算', '实付价格计算', '价格核算'],
  商品答疑: ['商品咨询', '产品问答', '商品问题解答'],
  营销促单: ['促单转化', '带货促单', '营销转化'],
  尺码建议: ['尺码推荐', '选码指导', '码数建议'],
};

const chineseNumerals = ['一', '二', '三', '四', '五', '六', '七', '八', '九', '十'];
/** Neutral labels for skills without a curated synonym (varied, so one clash with an old name does not block them all). */
const neutralPrefixes = ['专项', '模块', '流程', '指引', '任务'];

export function applySkillIds(builder: VariantBuilder): void {
  const { harness, rng } = builder;
  if (harness.skills.length === 0) return;
  const style = rng.pick(idStyles);
  const renameNames = rng.chance(0.7);
  const ids = builder.allocator((name) => skillIdPattern.test(name));
  const names = builder.allocator();
  const renames: TextRename[] = [];
  const newIds = new Map<string, string>();

  // Skill ids as they are now (an earlier family may not touch them, but keep the lookup honest).
  const canonicalIdOf = new Map(
    Object.entries(builder.mapping.skills).map(([canonical, entry]) => [entry.id, canonical]),
  );
  harness.skills.forEach((skill, index) => {
    const id = builder.renameable(skill.id)
      ? ids.allocate(renameCandidates(skill.id, style, 'skill', rng), () => styleName(skill.id, 'opaque', 'skill', rng))
      : skill.id;
    newIds.set(skill.id, id);
    renames.push({ from: skill.id, to: id, kind: 'skill_id', scope: 'entity' });
    let name = skill.name;
    if (renameNames && builder.renameable(skill.name)) {
      const synonyms = skillNameSynonyms[skill.name] ?? [];
      name = names.allocate(
        rng.shuffle(synonyms),
        () => `${rng.pick(neutralPrefixes)}${chineseNumerals[index % 10]}·${rng.int(10, 99)}`,
      );
      // A short name cannot be renamed in free text, so it keeps its old spelling there; renaming it only in the heading would make the two disagree.
      if ([...skill.name].length < MIN_PHRASE_LENGTH) name = skill.name;
      else renames.push({ from: skill.name, to: name, kind: 'skill_name', scope: 'harness' });
    }
    const canonical = canonicalIdOf.get(skill.id);
    if (canonical !== undefined) builder.mapping.skills[canonical] = { id, name };
    skill.id = id;
    skill.name = name;
  });
  for (const hook of harness.hooks)
    if (hook.skills !== undefined) hook.skills = hook.skills.map((id) => newIds.get(id) ?? id);
  builder.rename(renames);
  builder.markFamily('skill_ids');
}

/** The skill_ids family as an entry of the operator table (hsa-operators.ts). */
export const skillIdsOperator: HsaOperator = {
  family: 'skill_ids',
  summary:
    'skill id and name renames (snake, camel, kebab, synonyms, opaque codes, Chinese names) with every reference',
  applyRank: 1,
  defaultWeight: 0.6,
  apply: applySkillIds,
};
