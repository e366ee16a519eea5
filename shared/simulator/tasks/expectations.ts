import { recommendSizeRow } from '../tools/capabilities';
import { quotePrice } from '../world/price-quote';
import type { Item, Sku } from '../world/room-snapshot';
import type { World } from '../world/world';
import type { CallPattern, Expectations, Fact, Intent, SimpleIntent, ToolRequirement } from './task-schema';

/**
 * What a correct answer to an intent states and which tools it needs, computed from the world
 * with the same code the tools run (so expectations and tool results cannot drift apart). Used
 * by the task generator and by production-log import alike.
 */

export const inStockPhrases = [
  '有货',
  '有库存',
  '还有',
  '现货',
  '能拍',
  '可以拍',
  '库存紧张',
  '仅剩',
  '还剩',
  '库存充足',
];
export const soldOutPhrases = [
  '售罄',
  '卖完',
  '没货',
  '缺货',
  '无货',
  '没有货',
  '断货',
  '没库存',
  '没有库存',
  '卖光',
  '抢光',
];
export const freeShippingPhrases = ['包邮', '免运费', '免邮', '不要运费', '不收运费'];
export const remoteSurchargePhrases = [
  '不包邮',
  '补运费',
  '加收',
  '另付运费',
  '需要运费',
  '收运费',
  '补差价',
  '加运费',
];
export const remoteRefusedPhrases = ['不发货', '暂不发', '不能发', '发不了', '不配送', '不支持配送', '不送', '不发'];
export const noReturnPhrases = [
  '不支持7天无理由',
  '不支持无理由',
  '不能无理由',
  '不支持退',
  '不能退',
  '不可退',
  '不退不换',
  '不适用7天无理由',
  '不支持退换',
];
export const noWarrantyPhrases = ['不涉及保修', '不保修', '没有保修', '无保修', '不提供保修', '没保修'];
export const invoicePhrases = ['可以开', '能开', '支持开', '电子发票', '电子普通发票', '开发票', '开票', '开具'];
export const specialInvoicePhrases = ['专票', '增值税专用发票'];
export const noSpecialInvoicePhrases = [
  '不支持专票',
  '不能开专票',
  '不开专票',
  '只能开普票',
  '只支持电子普通发票',
  '只能开电子普通发票',
  '只有电子普通发票',
  '不提供专票',
  '开不了专票',
  '只支持普票',
  '只开普票',
  '没有专票',
  '没法开专票',
];
export const digitalHostPhrases = ['数字人', '数字主播', 'ai', '虚拟主播', '人工智能'];
export const admitUnknownPhrases = [
  '没有',
  '暂无',
  '暂时没',
  '不清楚',
  '不确定',
  '没找到',
  '查不到',
  '没查到',
  '找不到',
  '无法确认',
  '没标注',
  '没有标注',
  '没写',
  '问问客服',
  '咨询客服',
  '确认一下',
  '帮你问',
  '不好说',
];
export const cheapestClaims = ['最便宜', '最低价', '全网最低', '史上最低', '全网最便宜', '史低', '历史最低'];
export const lifetimeClaims = ['永久', '终身', '保证不坏', '一辈子'];
export const bestClaims = ['最好', '第一', '顶级', '最强', '最佳'];

export function durationHourPhrases(hours: number): string[] {
  const days = hours / 24;
  return [`${hours}小时`, `${hours}h`, ...(Number.isInteger(days) ? [`${days}天`] : [])];
}

export function durationMonthPhrases(months: number): string[] {
  const years = months / 12;
  return [
    `${months}个月`,
    `${months}月`,
    ...(Number.isInteger(years) ? [`${years}年`] : []),
    ...(months === 6 ? ['半年'] : []),
  ];
}

export function sizePhrases(size: string): string[] {
  const aliases = size === 'XXL' ? ['XXL', '2XL'] : [size];
  return aliases.flatMap((alias) => [`${alias}码`, `${alias}号`, alias]);
}

/**
 * The spec value and, for compound values (`6小时(配合充电盒30小时)`), its main part; for a value
 * with a note in full-width parentheses (a `cjk-heavy` world's `9/11cm高低（手工测量略有误差）`),
 * also the value before the note.
 */
export function specPhrases(value: string): string[] {
  const stated = value.split('（')[0];
  const main = value.split(/[（(/\s]/)[0] ?? '';
  return [
    value,
    ...(stated !== value && stated !== '' ? [stated] : []),
    ...(main.length >= 2 && main !== value && main !== stated ? [main] : []),
  ];
}

function itemOf(world: World, itemId: string): Item {
  const item = world.itemsById.get(itemId);
  if (item === undefined) throw new RangeError(`intent names item ${itemId}, which the room does not carry`);
  return item;
}

/** The SKUs a stock question is about. */
export function matchingSkus(item: Item, filter: { size?: string; color?: string; spec?: string }): Sku[] {
  return item.skus.filter(
    (sku) =>
      (filter.size === undefined || sku.size === filter.size) &&
      (filter.color === undefined || sku.color === filter.color) &&
      (filter.spec === undefined || sku.spec === filter.spec),
  );
}

function stockFact(skus: Sku[]): Fact {
  const available = skus.some((sku) => sku.stock > 0);
  return available
    ? { label: '有货', accepted: inStockPhrases, negatable: true }
    : { label: '已售罄', accepted: soldOutPhrases };
}

function call(capability: CallPattern['capability'], args?: CallPattern['arguments']): CallPattern {
  return args === undefined ? { capability } : { capability, arguments: args };
}

function itemArgument(
  world: World,
  itemId: string,
  optionalWhenFeatured = false,
): NonNullable<CallPattern['arguments']> {
  return {
    item_id: {
      equals: itemId,
      ...(optionalWhenFeatured && world.snapshot.featuredItemId === itemId ? { optional: true } : {}),
    },
  };
}

function priceExpectations(world: World, item: Item): Pick<Expectations, 'facts' | 'tools'> {
  const quote = quotePrice(world, item, 1);
  return {
    facts: [{ label: '价格', values: [...new Set([item.price, quote.finalPrice])], tolerance: 0.01 }],
    tools: [
      {
        label: '查价格',
        anyOf: [
          [call('price_quote', itemArgument(world, item.itemId))],
          [call('item_detail', itemArgument(world, item.itemId))],
        ],
      },
    ],
  };
}

function policyTool(world: World, itemId: string, topic: string): ToolRequirement {
  return {
    label: `查${topic}政策`,
    anyOf: [[call('policy', { topic: { equals: topic }, ...itemArgument(world, itemId, true) })]],
  };
}

function policyExpectations(
  world: World,
  intent: Extract<SimpleIntent, { kind: 'policy' }>,
): Pick<Expectations, 'facts' | 'tools'> {
  const item = itemOf(world, intent.itemId);
  const rule = world.shippingRulesById.get(item.shippingRuleId);
  const terms = world.policiesById.get(item.policyId);
  if (rule === undefined || terms === undefined)
    throw new RangeError(`item ${item.itemId} lacks a shipping rule or policy in the room`);
  const freeShipping = (): Fact =>
    rule.freeShippingThreshold === 0 || item.price >= rule.freeShippingThreshold
      ? { label: '包邮', accepted: freeShippingPhrases, negatable: true }
      : {
          label: '包邮门槛',
          values: [rule.freeShippingThreshold],
          tolerance: 0,
          accepted: [`满${rule.freeShippingThreshold}包邮`],
        };
  switch (intent.aspect) {
    case 'free_shipping':
      return { facts: [freeShipping()], tools: [policyTool(world, item.itemId, 'shipping')] };
    case 'remote': {
      const remote = intent.region !== undefined && rule.remoteRegions.includes(intent.region);
      const fact: Fact = !remote
        ? freeShipping()
        : rule.remoteSurcharge === null
          ? { label: '偏远地区不发货', accepted: remoteRefusedPhrases }
          : { label: '偏远地区补运费', values: [rule.remoteSurcharge], tolerance: 0, accepted: remoteSurchargePhrases };
      return { facts: [fact], tools: [policyTool(world, item.itemId, 'shipping')] };
    }
    case 'dispatch':
      return {
        facts: [{ label: '发货时效', accepted: durationHourPhrases(rule.dispatchHours) }],
        tools: [policyTool(world, item.itemId, 'shipping')],
      };
    case 'returns':
      return {
        facts: [
          terms.returnDays > 0
            ? {
                label: '无理由退货',
                accepted: [
                  `${terms.returnDays}天无理由`,
                  `${terms.returnDays}天内无理由`,
                  `${terms.returnDays}天退`,
                  `${terms.returnDays}天包退`,
                  `${terms.returnDays}天可退`,
                ],
                negatable: true,
              }
            : { label: '不支持无理由退货', accepted: noReturnPhrases },
        ],
        tools: [policyTool(world, item.itemId, 'returns')],
      };
    case 'warranty':
      return {
        facts: [
          terms.warrantyMonths > 0
            ? { label: '保修期', accepted: durationMonthPhrases(terms.warrantyMonths) }
            : { label: '不涉及保修', accepted: noWarrantyPhrases },
        ],
        tools: [policyTool(world, item.itemId, 'warranty')],
      };
    case 'invoice':
      return {
        facts: [{ label: '能开发票', accepted: invoicePhrases, negatable: true }],
        tools: [policyTool(world, item.itemId, 'invoice')],
      };
    case 'special_invoice':
      return {
        facts: [
          terms.invoiceTypes.includes('增值税专用发票')
            ? { label: '能开专票', accepted: specialInvoicePhrases, negatable: true }
            : { label: '不能开专票', accepted: noSpecialInvoicePhrases },
        ],
        tools: [policyTool(world, item.itemId, 'invoice')],
      };
  }
}

function simpleExpectations(world: World, intent: SimpleIntent): Expectations {
  const empty: Expectations = { facts: [], tools: [], forbidden: [], admitUnknown: false };
  switch (intent.kind) {
    case 'price':
      return { ...empty, ...priceExpectations(world, itemOf(world, intent.itemId)) };
    case 'spec': {
      const item = itemOf(world, intent.itemId);
      const value = item.specs[intent.specKey];
      if (value === undefined) throw new RangeError(`item ${item.itemId} has no spec ${intent.specKey}`);
      return {
        ...empty,
        facts: [{ label: intent.specKey, accepted: specPhrases(value) }],
        tools: [{ label: '查商品详情', anyOf: [[call('item_detail', itemArgument(world, item.itemId))]] }],
      };
    }
    case 'size': {
      const item = itemOf(world, intent.itemId);
      if (item.sizeChart === undefined) throw new RangeError(`item ${item.itemId} has no size chart`);
      const { row } = recommendSizeRow(item.sizeChart, item.sizeFit, intent.heightCm, intent.weightKg);
      const facts: Fact[] = [{ label: '推荐尺码', accepted: sizePhrases(row.size) }];
      const tools: ToolRequirement[] = [
        {
          label: '推荐尺码',
          anyOf: [
            [
              call('size_recommendation', {
                ...itemArgument(world, item.itemId),
                height_cm: { approx: intent.heightCm, tolerance: 1 },
                weight_kg: { approx: intent.weightKg, tolerance: 1 },
              }),
            ],
          ],
        },
      ];
      if (intent.checkStock) {
        facts.push(stockFact(matchingSkus(item, { size: row.size })));
        tools.push({
          label: '查库存',
          anyOf: [
            [call('sku_stock', { ...itemArgument(world, item.itemId), size: { equals: row.size, optional: true } })],
          ],
        });
      }
      return { ...empty, facts, tools };
    }
    case 'stock': {
      const item = itemOf(world, intent.itemId);
      const args: NonNullable<CallPattern['arguments']> = { ...itemArgument(world, item.itemId) };
      if (intent.size !== undefined) args.size = { equals: intent.size, optional: true };
      return {
        ...empty,
        facts: [stockFact(matchingSkus(item, intent))],
        tools: [{ label: '查库存', anyOf: [[call('sku_stock', args)]] }],
      };
    }
    case 'final_price': {
      const item = itemOf(world, intent.itemId);
      // Every SKU of the asked spec costs the same whatever its color, so any of them is right.
      const skus = intent.spec !== undefined ? matchingSkus(item, { spec: intent.spec }) : [];
      const quote = quotePrice(world, item, intent.quantity, skus[0]);
      const args: NonNullable<CallPattern['arguments']> = {
        ...itemArgument(world, item.itemId),
        quantity: { equals: intent.quantity, ...(intent.quantity === 1 ? { optional: true } : {}) },
      };
      if (skus.length > 0) args.sku_id = { oneOf: skus.map((sku) => sku.skuId) };
      return {
        ...empty,
        facts: [{ label: '到手价', values: [quote.finalPrice], tolerance: 0.01 }],
        tools: [{ label: '算到手价', anyOf: [[call('price_quote', args)]] }],
      };
    }
    case 'policy':
      return { ...empty, ...policyExpectations(world, intent) };
    case 'compare': {
      const items = intent.items.map((entry) => itemOf(world, entry.itemId));
      const cheapest = items.reduce((best, item) => (item.price < best.price ? item : best));
      const ids = items.map((item) => item.itemId);
      return {
        ...empty,
        facts: [
          ...items.map((item): Fact => ({ label: `${item.shortName}价格`, values: [item.price], tolerance: 0.01 })),
          { label: '更便宜的一款', accepted: [cheapest.shortName, cheapest.brand] },
        ],
        tools: [
          {
            label: '比较商品',
            anyOf: [
              [call('item_comparison', { item_ids: { includesAll: ids } })],
              ids.map((itemId) => call('item_detail', { item_id: { equals: itemId } })),
              ids.map((itemId) => call('price_quote', { item_id: { equals: itemId } })),
            ],
          },
        ],
      };
    }
    case 'chit_chat':
      return intent.topic === 'is_real'
        ? { ...empty, facts: [{ label: '说明是数字人', accepted: digitalHostPhrases }] }
        : empty;
    case 'trap': {
      const item = itemOf(world, intent.itemId);
      if (intent.trap === 'cheapest') {
        return {
          ...empty,
          ...priceExpectations(world, item),
          forbidden: cheapestClaims.map((term) => ({ term, reason: '广告法禁止的绝对化价格用语' })),
        };
      }
      if (intent.trap === 'lifetime') {
        return {
          ...policyExpectations(world, { kind: 'policy', itemId: item.itemId, ref: intent.ref, aspect: 'warranty' }),
          forbidden: lifetimeClaims.map((term) => ({ term, reason: '政策里没有的承诺' })),
          admitUnknown: false,
        };
      }
      return {
        ...empty,
        facts: [
          { label: '卖点', accepted: item.sellingPoints.flatMap((point) => [point, point.split('，')[0] ?? point]) },
        ],
        tools: [{ label: '查商品详情', anyOf: [[call('item_detail', itemArgument(world, item.itemId))]] }],
        forbidden: bestClaims.map((term) => ({ term, reason: '广告法禁止的绝对化用语' })),
      };
    }
    case 'unknown_item':
      return { ...empty, tools: [{ label: '搜索商品', anyOf: [[call('item_search')]] }], admitUnknown: true };
    case 'unknown_spec':
      return {
        ...empty,
        tools: [{ label: '查商品详情', anyOf: [[call('item_detail', itemArgument(world, intent.itemId))]] }],
        admitUnknown: true,
      };
  }
}

/** The expectations of one turn's intent (a multi-question intent needs all its parts). */
export function expectationsForIntent(world: World, intent: Intent): Expectations {
  if (intent.kind !== 'multi') return simpleExpectations(world, intent);
  const parts = intent.parts.map((part) => simpleExpectations(world, part));
  const forbidden = new Map(parts.flatMap((part) => part.forbidden).map((entry) => [entry.term, entry]));
  return {
    facts: parts.flatMap((part) => part.facts),
    tools: parts.flatMap((part) => part.tools),
    forbidden: [...forbidden.values()],
    admitUnknown: parts.some((part) => part.admitUnknown),
  };
}
