import type { Rng } from '../../random/rng';
import { skillIdPattern } from '../harness-schema';
import type { Skill } from '../harness-types';
import { paraphraseChinese } from './chinese-lexicon';
import { renameCandidates, styleName, type NamingStyle } from './name-allocator';
import type { VariantBuilder } from './variant-builder';
import type { HsaOperator } from './hsa-operator';

/**
 * skill_content: reorders independent list items of a skill body, changes list and heading
 * formatting, paraphrases with the task-preserving lexicon, and adds distractor skills that no
 * task of the live room needs (lottery rules, co-streaming, fan club, stream schedule).
 */

/** Words that make a numbered list a sequence of steps (its order then matters). */
const sequenceWords = /先|再|然后|之后|接着|最后|首先|其次|上一步|下一步|前面|后面|第[一二三四五六七八九十\d]步|随后/;

const listItemPattern = /^(\s*)(?:(\d+)[.)、]|（(\d+)）|([-*+•·]))\s+(.*)$/;
const headingPattern = /^(#{1,6})\s+(.+)$/;

type NumberedFormat = (index: number) => string;
const numberedFormats: readonly NumberedFormat[] = [
  (index) => `${index}.`,
  (index) => `${index})`,
  (index) => `（${index}）`,
  (index) => `${index}、`,
];
const bulletFormats = ['-', '*', '•'];
const headingFormats: ReadonlyArray<(level: number, text: string) => string> = [
  (level, text) => `${'#'.repeat(level)} ${text}`,
  (level, text) => `${'#'.repeat(Math.min(6, level + 1))} ${text}`,
  (_level, text) => `【${text}】`,
  (_level, text) => `**${text}**`,
];

interface ListBlock {
  start: number;
  /** Each item: its lines (first line without its marker). */
  items: string[][];
  numbered: boolean;
  indent: string;
}

/** Finds top-level lists: runs of items with the same marker kind, continuation lines indented under them. */
function findLists(lines: string[]): ListBlock[] {
  const blocks: ListBlock[] = [];
  let current: ListBlock | undefined;
  lines.forEach((line, index) => {
    const match = listItemPattern.exec(line);
    if (match) {
      const numbered = match[4] === undefined;
      const indent = match[1];
      if (
        current &&
        current.numbered === numbered &&
        current.indent === indent &&
        current.start + current.items.reduce((sum, item) => sum + item.length, 0) === index
      ) {
        current.items.push([match[5]]);
        return;
      }
      current = { start: index, items: [[match[5]]], numbered, indent };
      blocks.push(current);
      return;
    }
    const continues =
      current &&
      current.start + current.items.reduce((sum, item) => sum + item.length, 0) === index &&
      line.trim() !== '' &&
      /^\s+/.test(line) &&
      line.length - line.trimStart().length > current.indent.length;
    if (continues && current) current.items[current.items.length - 1].push(line);
    else current = undefined;
  });
  return blocks;
}

/** Reorders independent items and restyles list and heading markers of a Markdown body. */
export function restyleBody(body: string, rng: Rng, options: { reorder: boolean; restyle: boolean }): string {
  const lines = body.split('\n');
  const blocks = findLists(lines);
  const numberedFormat = rng.pick(numberedFormats);
  const bulletFormat = rng.pick(bulletFormats);
  const headingFormat = rng.pick(headingFormats);
  // Replace from the last block so earlier line indexes stay valid.
  for (const block of [...blocks].reverse()) {
    const independent = !block.numbered || !block.items.some((item) => sequenceWords.test(item.join('\n')));
    const items = options.reorder && independent && block.items.length > 1 ? rng.shuffle(block.items) : block.items;
    const rendered = items.flatMap((item, index) => {
      const marker = block.numbered
        ? options.restyle
          ? numberedFormat(index + 1)
          : `${index + 1}.`
        : options.restyle
          ? bulletFormat
          : '-';
      return [`${block.indent}${marker} ${item[0]}`, ...item.slice(1)];
    });
    const length = block.items.reduce((sum, item) => sum + item.length, 0);
    lines.splice(block.start, length, ...rendered);
  }
  if (!options.restyle) return lines.join('\n');
  return lines
    .map((line) => {
      const heading = headingPattern.exec(line);
      return heading ? headingFormat(heading[1].length, heading[2]) : line;
    })
    .join('\n');
}

interface DistractorSkill {
  id: string;
  name: string;
  description: string;
  body: string;
}

const distractorSkills: readonly DistractorSkill[] = [
  {
    id: 'lottery_rules',
    name: '直播间抽奖规则',
    description: '说明直播间抽奖、福袋的参与方式和开奖规则',
    body: '1. 仅当观众问抽奖、福袋怎么参与时使用本技能。\n2. 说明参与方式：关注主播并在评论区发送指定口令。\n3. 开奖时间和奖品以直播间公告为准，不承诺中奖。',
  },
  {
    id: 'co_streaming',
    name: '连麦互动',
    description: '处理观众申请连麦的弹幕',
    body: '1. 仅当观众申请连麦时使用本技能。\n2. 说明连麦需要主播在后台发起，请观众耐心等待。\n3. 连麦时不聊与直播无关的敏感话题。',
  },
  {
    id: 'fan_club_perks',
    name: '粉丝团福利',
    description: '介绍粉丝团等级、灯牌和对应福利',
    body: '1. 仅当观众问粉丝团、灯牌或亲密度时使用本技能。\n2. 说明加入方式：点击主播头像旁的灯牌加入粉丝团。\n3. 福利以粉丝团页面显示为准，不额外承诺。',
  },
  {
    id: 'stream_preview',
    name: '开播预告',
    description: '回答观众关于下一场直播时间的问题',
    body: '1. 仅当观众问下次什么时候开播时使用本技能。\n2. 以直播间主页的预告为准；没有预告时说"关注主播，开播会提醒哦"。',
  },
];

const idStyles: readonly NamingStyle[] = ['snake', 'camel', 'kebab', 'opaque'];

export function applySkillContent(builder: VariantBuilder): void {
  const { harness, rng } = builder;
  const protect = builder.protectedPhrases();
  let changed = false;
  for (const skill of harness.skills) {
    const reorder = rng.chance(0.6);
    const restyle = rng.chance(0.5);
    const paraphrase = rng.chance(0.6);
    let body = reorder || restyle ? restyleBody(skill.body, rng, { reorder, restyle }) : skill.body;
    let description = skill.description;
    if (paraphrase) {
      body = paraphraseChinese(body, rng, 0.5, protect);
      description = paraphraseChinese(description, rng, 0.5, protect);
    }
    changed ||= body !== skill.body || description !== skill.description;
    skill.body = body;
    skill.description = description;
  }
  // Distractor skills need a skills section to be shown in.
  const hasSkillsSection = harness.prompt.sections.some((section) => section.kind === 'skills');
  if (hasSkillsSection && (!changed || rng.chance(0.5))) addDistractorSkills(builder, rng);
  if (!changed && !hasSkillsSection) return;
  builder.markFamily('skill_content');
}

function addDistractorSkills(builder: VariantBuilder, rng: Rng): void {
  const { harness } = builder;
  const ids = builder.allocator(
    (name) => skillIdPattern.test(name),
    harness.skills.map((skill) => skill.id),
  );
  const names = builder.allocator(
    undefined,
    harness.skills.map((skill) => skill.name),
  );
  const style = rng.pick(idStyles);
  for (const distractor of rng.sample(distractorSkills, rng.int(1, 2))) {
    const id = ids.allocate(renameCandidates(distractor.id, style, 'skill', rng), () =>
      styleName(distractor.id, 'opaque', 'skill', rng),
    );
    const name = names.allocate([distractor.name], () => `${distractor.name}${rng.int(2, 9)}`);
    const skill: Skill = { id, name, description: distractor.description, tools: [], body: distractor.body };
    harness.skills.splice(rng.int(0, harness.skills.length), 0, skill);
    builder.mapping.addedSkills.push(id);
  }
}

/** The skill_content family as an entry of the operator table (hsa-operators.ts). */
export const skillContentOperator: HsaOperator = {
  family: 'skill_content',
  summary: 'skill body reordering, formatting, lexicon paraphrase, distractor skills',
  applyRank: 4,
  defaultWeight: 0.6,
  apply: applySkillContent,
};
