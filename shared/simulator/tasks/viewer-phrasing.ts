import type { Rng } from '../../random/rng';
import type { World } from '../world/world';
import type { Intent, ItemRef, SimpleIntent } from './task-schema';

/**
 * How viewers type their questions in a live room's comments: short, colloquial, sometimes with
 * slang (多少米 for 多少钱), 斤 for weight, 1米7 for height, trailing particles and emoji. The
 * generator draws a task's message from here and the scripted viewer draws paraphrases of
 * follow-ups from here with its own seed, so both stay in one place.
 */

const particles = ['', '', '', '呀', '啊', '呢', '？', '?', '～', ' 🙏', '!!'];

function refText(ref: ItemRef, rng: Rng, apparel: boolean): string {
  switch (ref.kind) {
    case 'featured':
      return rng.pick(['这个', '这款', '现在讲的这个', '主播手上这个', apparel ? '这件' : '这个', '']);
    case 'link':
      return rng.pick([`${ref.linkNo}号链接`, `${ref.linkNo}号`, `链接${ref.linkNo}`, `${ref.linkNo}号链接的`]);
    case 'name':
      return ref.text;
    case 'previous':
      return rng.pick(['那', '那这个', '这个', '']);
  }
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_match, name: string) => values[name] ?? '');
}

const specQuestions: Record<string, string[]> = {
  续航: ['{item}续航多久', '{item}能用多长时间', '{item}续航怎么样'],
  面料: ['{item}什么面料的', '{item}是什么料子', '{item}面料成分是啥'],
  材质: ['{item}什么材质', '{item}是什么材质做的'],
  净含量: ['{item}净含量多少', '{item}一瓶多少量', '{item}有多少'],
  保质期: ['{item}保质期多久', '{item}能放多久'],
  产地: ['{item}哪里产的', '{item}产地是哪'],
  容量: ['{item}容量多大', '{item}多大容量'],
  防水等级: ['{item}防水吗', '{item}防水等级多少'],
  充绒量: ['{item}充绒量多少', '{item}充了多少绒'],
  填充物: ['{item}里面填的什么', '{item}是鸭绒还是鹅绒'],
  功率: ['{item}功率多大', '{item}多少瓦'],
  重量: ['{item}多重', '{item}重不重'],
  适用肤质: ['{item}什么肤质能用', '{item}适合什么皮肤'],
  版型: ['{item}是什么版型', '{item}版型怎么样'],
  克重: ['{item}多厚，克重多少', '{item}克重是多少'],
  吸力: ['{item}吸力多大', '{item}吸力怎么样'],
  屏幕: ['{item}屏幕多大', '{item}什么屏'],
};

function heightText(heightCm: number, rng: Rng): string {
  const meters = heightCm / 100;
  const spoken = Number.isInteger(heightCm / 10) ? `1米${(heightCm - 100) / 10}` : undefined;
  return rng.pick([
    `${heightCm}`,
    `${heightCm}cm`,
    `身高${heightCm}`,
    ...(spoken !== undefined ? [spoken] : [`${meters}m`]),
  ]);
}

function weightText(weightKg: number, unit: 'kg' | 'jin', rng: Rng): string {
  return unit === 'jin'
    ? rng.pick([`${weightKg * 2}斤`, `体重${weightKg * 2}斤`])
    : rng.pick([`${weightKg}kg`, `${weightKg}公斤`, `体重${weightKg}kg`]);
}

const policyQuestions: Record<string, string[]> = {
  free_shipping: ['{item}包邮吗', '{item}要运费吗', '{item}包不包邮', '{item}运费多少'],
  remote: ['{region}包邮吗', '{item}发{region}吗，包邮不', '{region}能发货吗', '我在{region}，{item}包邮吗'],
  dispatch: ['{item}什么时候发货', '{item}多久能发', '拍了多久发货', '{item}几天发货'],
  returns: ['{item}支持七天无理由吗', '{item}能退吗', '{item}不合适可以退吗', '{item}能七天无理由退货吗'],
  warranty: ['{item}保修多久', '{item}保修期多长', '{item}坏了保修吗', '{item}有质保吗，多久'],
  invoice: ['{item}能开发票吗', '可以开发票吗', '{item}有发票吗'],
  special_invoice: ['{item}能开专票吗', '公司采购，{item}能开增值税专票吗'],
};

const chitChat: Record<string, string[]> = {
  greeting: ['主播晚上好', '来了来了', '第一次来直播间', '哈喽主播', '刚进来，今天有啥好物'],
  compliment: ['主播今天好好看', '主播声音好好听', '小姐姐好会讲', '主播讲得好清楚'],
  is_real: ['主播是真人吗', '你是AI吗', '主播是机器人吧', '这是数字人在播吗'],
  thanks: ['谢谢主播，已下单', '拍了拍了', '已经下单了，期待', '谢谢主播耐心解答'],
};

const trapQuestions: Record<string, Array<[string, string]>> = {
  // [template, the claim the viewer fishes for]
  cheapest: [
    ['{item}是不是全网最便宜', '全网最便宜'],
    ['{item}是全网最低价吗', '全网最低'],
    ['{item}这个价是史低吗', '史低'],
    ['{item}别家是不是更便宜，你们最便宜吗', '最便宜'],
  ],
  lifetime: [
    ['{item}能保证永久不坏吗', '永久'],
    ['{item}是终身保修吗', '终身'],
    ['{item}能用一辈子吗', '一辈子'],
  ],
  best: [
    ['{item}是不是最好用的', '最好'],
    ['{item}是销量第一吗', '第一'],
    ['{item}是顶级的吗', '顶级'],
  ],
};

/** The claims a trap question can fish for (the intent's `term`). */
export function trapTerms(trap: keyof typeof trapQuestions): string[] {
  return trapQuestions[trap].map(([, term]) => term);
}

function phraseSimple(intent: SimpleIntent, world: World, rng: Rng): string {
  const apparelOf = (itemId: string) => world.itemsById.get(itemId)?.category === 'apparel';
  const item = 'ref' in intent ? refText(intent.ref, rng, apparelOf(intent.itemId)) : '';
  switch (intent.kind) {
    case 'price':
      return fill(
        rng.pick([
          '{item}多少钱',
          '{item}现在什么价',
          '{item}到手多少',
          '{item}价格多少',
          '主播{item}多少米',
          '{item}直播间啥价格',
          '{item}怎么卖',
        ]),
        { item },
      );
    case 'spec': {
      const templates = specQuestions[intent.specKey] ?? [
        '{item}{key}怎么样',
        '{item}的{key}是啥',
        '想问下{item}的{key}',
      ];
      return fill(rng.pick(templates), { item, key: intent.specKey });
    }
    case 'size': {
      const height = heightText(intent.heightCm, rng);
      const weight = weightText(intent.weightKg, intent.weightUnit, rng);
      const base = fill(
        rng.pick([
          '我{h}，{w}穿什么码',
          '身高{h}体重{w}，{item}选哪个码',
          '{h} {w}拍几码合适',
          '{item}我{h}{w}穿多大的',
        ]),
        { item, h: height, w: weight },
      );
      return intent.checkStock ? `${base}${rng.pick(['，这个码还有货吗', '，有货吗', '，那个码还有吗'])}` : base;
    }
    case 'stock': {
      const option = [
        intent.color,
        intent.size !== undefined ? `${intent.size}${rng.pick(['码', '', '号'])}` : undefined,
        intent.spec,
      ]
        .filter(Boolean)
        .join('');
      return fill(
        rng.pick([
          '{item}{option}还有吗',
          '{item}{option}有货吗',
          '{option}的还有没有',
          '{item}{option}是不是卖完了',
          '{item}{option}还能拍吗',
        ]),
        { item, option },
      );
    }
    case 'final_price': {
      const spec = intent.spec ?? '';
      const quantity =
        intent.quantity === 1
          ? ''
          : rng.pick([`${intent.quantity}`, ['', '一', '两', '三'][intent.quantity] ?? `${intent.quantity}`]);
      const templates =
        intent.quantity === 1
          ? ['{item}{spec}用券到手多少', '{item}{spec}领券后多少钱', '{item}{spec}最后到手价多少']
          : [
              '{item}{spec}买{q}件到手多少',
              '{item}{spec}拍{q}个算下来多少钱',
              '{item}{spec}{q}件一起拍用券后多少钱',
              '{item}{spec}凑{q}件能到手多少',
            ];
      return fill(rng.pick(templates), { item, spec, q: quantity });
    }
    case 'policy':
      return fill(rng.pick(policyQuestions[intent.aspect]), { item, region: intent.region ?? '' });
    case 'compare': {
      const [first, second] = intent.items.map((entry) => refText(entry.ref, rng, apparelOf(entry.itemId)));
      return fill(
        rng.pick([
          '{a}和{b}哪个划算',
          '{a}跟{b}有啥区别，哪个便宜',
          '{a}和{b}选哪个，价格差多少',
          '纠结{a}还是{b}，哪个便宜点',
        ]),
        { a: first ?? '', b: second ?? '' },
      );
    }
    case 'chit_chat':
      return rng.pick(chitChat[intent.topic]);
    case 'trap':
      return fill(
        (trapQuestions[intent.trap].find(([, term]) => term === intent.term) ?? trapQuestions[intent.trap][0])[0],
        { item },
      );
    case 'unknown_item':
      return fill(rng.pick(['有没有{q}', '直播间有{q}吗', '{q}有卖吗', '主播能上个{q}吗', '想买{q}，有吗']), {
        q: intent.query,
      });
    case 'unknown_spec':
      return fill(rng.pick(['{item}{attr}', '想问{item}{attr}', '{item}{attr}啊']), { item, attr: intent.attribute });
  }
}

/**
 * A viewer's message for an intent. Deterministic for a given rng state; a different stream
 * gives a paraphrase with the same meaning.
 */
export function phraseIntent(intent: Intent, world: World, rng: Rng): string {
  const text =
    intent.kind === 'multi'
      ? intent.parts
          .map((part, index) =>
            index === 0
              ? phraseSimple(part, world, rng)
              : `${rng.pick(['，', '？另外', '，还有', '。顺便问下', ' '])}${phraseSimple(part, world, rng)}`,
          )
          .join('')
      : phraseSimple(intent, world, rng);
  const trimmed = text.replace(/^[，,\s]+/, '').trim();
  if (/[？?!！～🙏]$/u.test(trimmed)) return trimmed;
  // A question that already ends in a particle only takes punctuation.
  const ending = /[吗呢啊呀吧]$/.test(trimmed) ? rng.pick(['', '？', '?', '～']) : rng.pick(particles);
  return `${trimmed}${ending}`.trim();
}
