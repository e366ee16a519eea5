import type { Rng } from '../../random/rng';
import type { Intent } from './task-schema';

/**
 * How viewers of a production room type: a question wrapped in several clauses and sentences, a
 * greeting, who they are buying for and why they hesitate, an aside in slang, a plea for an
 * answer, particles and emoji. The
 * clauses carry no numbers, items, sizes, colors or regions, so the question's intent (and what
 * the verifier grounds on the viewer's words) stays the question's own. `text: cjk-heavy` tasks
 * and the scripted viewer's paraphrases of them are worded this way.
 */

const openers = [
  '主播主播',
  '主播你好呀',
  '哈喽哈喽',
  '主播姐姐',
  '姐妹们',
  '家人们谁懂啊',
  '诶主播',
  '小姐姐',
  '救命',
  '终于蹲到直播了',
  '刚进直播间',
];
const openerMarks = ['！', '～', '！！', '，'];

const situations = [
  '刚下班赶上直播',
  '看了好几场了还没下手',
  '朋友推荐过来的',
  '头回在这个直播间买东西',
  '犹豫好久了',
  '购物车里放了好几天了',
  '想趁着活动囤点',
  '给家里人挑的',
  '平时不太会挑',
  '之前在别家买过类似的',
  '刷到好多次了',
  '老粉了每场都来',
];

const pricing = ['想看看值不值', '预算有限', '钱包在哭泣', '想算算划不划算'];
const concerns: Record<string, string[]> = {
  price: pricing,
  final_price: pricing,
  compare: ['俩都挺喜欢的', '纠结好久了', '选择困难症犯了'],
  size: ['平时穿衣服很纠结尺码', '怕买大了显胖', '上次在别家买的码偏小了', '身材有点微胖'],
  stock: ['看中好久了', '怕手慢抢不到', '上次来就没抢到'],
  policy: ['怕收到不合适', '之前售后踩过坑', '着急用', '家里人让我问清楚'],
  spec: ['想了解清楚再下单', '对这个比较在意', '买之前想问清楚'],
  trap: ['身边朋友都在问', '想确认下', '网上说法太多了'],
  unknown_item: ['到处找都没找到', '问了好几家了', '想顺便捎上'],
  unknown_spec: ['家里人比较在意这个', '买之前想问清楚', '之前踩过雷'],
  chit_chat: ['今天状态真好', '每天都来看', '下班就守着直播间', '好喜欢这个直播间的氛围'],
};

/** A sentence after the question: slang, a compliment, an aside. */
const asides = [
  '主播今天的妆好绝',
  '这场福利真的绝绝子',
  '已经码住了',
  '集美们冲冲冲',
  '直播间氛围好好',
  '主播声音好好听',
  '种草好久了',
  '真的会谢，每次都抢不到',
];

const closers = [
  '求回复🙏',
  '在线等挺急的',
  '蹲个回复',
  '谢谢主播',
  '麻烦主播看看',
  '拜托拜托',
  '急急急',
  '快回我呀',
  '求求了😭',
  '回复下呗～',
  '主播看看我',
  '等你回复哦',
];
const emoji = ['😭', '😂', '🙏', '🥺', '✨', '❤️', '👀', '🤔', '💕'];

/** The question (as phraseIntent words it) inside a production-style comment, drawn from `rng`. */
export function chattyMessage(question: string, intent: Intent, rng: Rng): string {
  const kind = intent.kind === 'multi' ? intent.parts[0].kind : intent.kind;
  const opener = rng.chance(0.75) ? `${rng.pick(openers)}${rng.pick(openerMarks)}` : '';
  const clauses: string[] = [];
  if (rng.chance(0.7)) clauses.push(rng.pick(situations));
  if (rng.chance(0.85)) clauses.push(rng.pick(concerns[kind] ?? situations));
  clauses.push(question);
  // After a question mark, tilde or emoji a space starts the next sentence; else a full stop does.
  const stop = /[？?!！～🙏]$/u.test(question) ? ' ' : rng.pick(['。', '！']);
  const aside = rng.chance(0.35) ? `${stop}${rng.pick(asides)}` : '';
  const closer = rng.chance(0.75) ? ` ${rng.pick(closers)}${rng.chance(0.4) ? rng.pick(emoji) : ''}` : '';
  return `${opener}${clauses.join('，')}${aside}${closer}`;
}
