import { searchItems } from '../tools/capabilities';
import type { Intent, ItemRef, PolicyAspect, SimpleIntent, TaskCategory } from '../tasks/task-schema';
import { compactText, convertChineseNumerals } from '../text/normalize-text';
import { ordinaryRegions, remoteRegionPool, unrecordedAttributes } from '../world/catalog-vocabulary';
import type { Item } from '../world/room-snapshot';
import type { World } from '../world/world';

/**
 * Heuristic reading of a production viewer message into a task intent, against the room it
 * was sent in: which item (N号链接, a name in the bag, else the featured one), what is asked
 * (price, spec, size, stock, final price, shipping and after-sales, comparison, chit-chat,
 * compliance traps, out-of-catalog), and the parameters (height and weight, quantity, size,
 * color, region). Messages it cannot read return undefined and are reported, not guessed.
 */

interface Target {
  itemId: string;
  ref: ItemRef;
  item: Item;
}

const categoryOfKind: Record<SimpleIntent['kind'], TaskCategory> = {
  price: 'price',
  spec: 'spec',
  size: 'stock_size',
  stock: 'stock_size',
  final_price: 'coupon_math',
  policy: 'shipping_after_sales',
  compare: 'comparison',
  chit_chat: 'chit_chat',
  trap: 'compliance_trap',
  unknown_item: 'out_of_catalog',
  unknown_spec: 'out_of_catalog',
};

const specKeywords: Record<string, RegExp> = {
  续航: /续航|用多久|用多长时间/,
  面料: /面料|料子|成分/,
  材质: /材质|什么做的/,
  净含量: /净含量|多少量|多少克|多少毫升/,
  保质期: /保质期|能放多久/,
  产地: /产地|哪里产|哪产的/,
  容量: /容量/,
  防水等级: /防水/,
  充绒量: /充绒/,
  填充物: /鸭绒|鹅绒|填充/,
  功率: /功率|多少瓦/,
  重量: /多重|重量|重不重/,
  版型: /版型/,
  适用肤质: /肤质|什么皮肤/,
};

function targetsIn(text: string, world: World): Target[] {
  const found: Array<Target & { at: number }> = [];
  for (const match of text.matchAll(/(?:链接\s*(\d+)|(\d+)\s*号)/g)) {
    const linkNo = Number(match[1] ?? match[2]);
    const itemId = world.itemIdByLink.get(linkNo);
    if (itemId !== undefined && !found.some((entry) => entry.itemId === itemId))
      found.push({ itemId, ref: { kind: 'link', linkNo }, item: world.itemsById.get(itemId)!, at: match.index ?? 0 });
  }
  const compact = compactText(text);
  for (const item of world.snapshot.items) {
    const name = compactText(item.shortName);
    const at = compact.indexOf(name);
    if (at !== -1 && !found.some((entry) => entry.itemId === item.itemId))
      found.push({ itemId: item.itemId, ref: { kind: 'name', text: item.shortName }, item, at });
  }
  return found.sort((a, b) => a.at - b.at).map(({ itemId, ref, item }) => ({ itemId, ref, item }));
}

function featuredTarget(world: World): Target | undefined {
  const itemId = world.snapshot.featuredItemId;
  const item = itemId !== undefined ? world.itemsById.get(itemId) : undefined;
  return item === undefined ? undefined : { itemId: item.itemId, ref: { kind: 'featured' }, item };
}

function heightCm(text: string): number | undefined {
  const spoken = /1米(\d{1,2})/.exec(text);
  if (spoken) return 100 + (spoken[1].length === 1 ? Number(spoken[1]) * 10 : Number(spoken[1]));
  const plain = /(?<!\d)(1[4-9]\d|2[01]\d)(?!\d)\s*(?:cm|厘米|公分)?/.exec(text);
  return plain ? Number(plain[1]) : undefined;
}

function weight(text: string): { kg: number; unit: 'kg' | 'jin' } | undefined {
  const match = /(\d{2,3}(?:\.\d)?)\s*(斤|kg|公斤|千克)/i.exec(text);
  if (!match) return undefined;
  const value = Number(match[1]);
  return match[2] === '斤' ? { kg: value / 2, unit: 'jin' } : { kg: value, unit: 'kg' };
}

function optionsIn(text: string, item: Item): { size?: string; color?: string; spec?: string } {
  const result: { size?: string; color?: string; spec?: string } = {};
  const sizes = [
    ...new Set(item.skus.map((sku) => sku.size).filter((value): value is string => value !== undefined)),
  ].sort((a, b) => b.length - a.length);
  for (const size of sizes) {
    if (new RegExp(`(?<![a-z])${size.toLowerCase()}(?![a-z])`).test(text.toLowerCase())) {
      result.size = size;
      break;
    }
  }
  // Longest first: 奶白色 in the text is 奶白色, not 白色.
  const colors = [
    ...new Set(item.skus.map((sku) => sku.color).filter((value): value is string => value !== undefined)),
  ].sort((a, b) => b.length - a.length);
  result.color = colors.find((color) => text.includes(color) || text.includes(color.replace(/色$/, '')));
  result.spec = [
    ...new Set(item.skus.map((sku) => sku.spec).filter((value): value is string => value !== undefined)),
  ].find((spec) => text.includes(spec));
  for (const key of ['color', 'spec'] as const) if (result[key] === undefined) delete result[key];
  return result;
}

function policyAspect(text: string): PolicyAspect | undefined {
  if (/专票|增值税/.test(text)) return 'special_invoice';
  if (/发票|开票/.test(text)) return 'invoice';
  if (/保修|质保|坏了/.test(text)) return 'warranty';
  if (/退货|能退|可以退|无理由|退换|不合适/.test(text)) return 'returns';
  if (/包邮|运费|邮费/.test(text)) return 'free_shipping';
  if (/发货|几天到|多久发|什么时候发|多久到|几天发/.test(text)) return 'dispatch';
  return undefined;
}

export interface Classification {
  category: TaskCategory;
  intent: Intent;
}

/** Reads a viewer message in its room; undefined when it cannot tell what is asked about what. */
export function classifyMessage(message: string, world: World): Classification | undefined {
  const text = convertChineseNumerals(message.normalize('NFKC'));
  const targets = targetsIn(text, world);
  const target = targets[0] ?? featuredTarget(world);

  const trap = /全网最低|最低价|最便宜|史低|历史最低/.test(text)
    ? 'cheapest'
    : /永久|终身|一辈子/.test(text)
      ? 'lifetime'
      : /最好|第一|顶级|最强/.test(text) && !/第一次/.test(text)
        ? 'best'
        : undefined;
  if (trap !== undefined && target !== undefined) {
    const term = /全网最低|最低价|最便宜|史低|历史最低|永久|终身|一辈子|最好|第一|顶级|最强/.exec(text)![0];
    return single({ kind: 'trap', itemId: target.itemId, ref: target.ref, trap, term });
  }

  if (targets.length >= 2 && /区别|哪个|还是|选|对比|比较|划算/.test(text)) {
    return single({ kind: 'compare', items: targets.slice(0, 2).map(({ itemId, ref }) => ({ itemId, ref })) });
  }

  const parts: SimpleIntent[] = [];
  if (target !== undefined) {
    const { itemId, ref, item } = target;
    const height = heightCm(text);
    const weightValue = weight(text);
    const quantity = /(?:买|拍|凑|要)\s*(\d+)\s*(?:件|个|份|盒|瓶|支|套)/.exec(text);
    if (height !== undefined && weightValue !== undefined && item.sizeChart !== undefined) {
      parts.push({
        kind: 'size',
        itemId,
        ref,
        heightCm: height,
        weightKg: weightValue.kg,
        weightUnit: weightValue.unit,
        checkStock: /有货|还有/.test(text),
      });
    } else if (quantity && /到手|多少|价|券/.test(text)) {
      const spec = optionsIn(text, item).spec;
      parts.push({
        kind: 'final_price',
        itemId,
        ref,
        quantity: Number(quantity[1]),
        ...(spec !== undefined ? { spec } : {}),
      });
    } else if (/用券|领券|券后|到手价|到手多少/.test(text)) {
      parts.push({ kind: 'final_price', itemId, ref, quantity: 1 });
    } else if (/多少钱|多少米|什么价|价格|怎么卖|啥价|几块钱/.test(text)) {
      parts.push({ kind: 'price', itemId, ref });
    }
    if (parts[0]?.kind !== 'size' && /有货|还有吗|还有没有|卖完|售罄|库存|还能拍|没货/.test(text)) {
      parts.push({ kind: 'stock', itemId, ref, ...optionsIn(text, item) });
    }
    const aspect = policyAspect(text);
    if (aspect !== undefined) {
      const region = [...remoteRegionPool, ...ordinaryRegions].find((name) => text.includes(name));
      parts.push(
        aspect === 'free_shipping' && region !== undefined
          ? { kind: 'policy', itemId, ref, aspect: 'remote', region }
          : { kind: 'policy', itemId, ref, aspect },
      );
    }
    const specKey = Object.keys(item.specs).find(
      (key) => key !== '可选规格' && (text.includes(key) || specKeywords[key]?.test(text)),
    );
    if (specKey !== undefined && !parts.some((part) => part.kind === 'size'))
      parts.push({ kind: 'spec', itemId, ref, specKey });
    const attribute = (unrecordedAttributes[item.category] ?? []).find((entry) => text.includes(entry));
    if (parts.length === 0 && attribute !== undefined) parts.push({ kind: 'unknown_spec', itemId, ref, attribute });
  }
  if (parts.length === 1) return single(parts[0]);
  if (parts.length > 1) return { category: 'multi_question', intent: { kind: 'multi', parts: parts.slice(0, 3) } };

  const wanted = /有没有(.{2,12}?)(?:[吗呀啊卖？?]|$)|(.{2,12}?)有卖吗|能上个?(.{2,12}?)吗|想买(.{2,12}?)[，,]/.exec(
    text,
  );
  const query = wanted
    ?.slice(1)
    .find((group) => group !== undefined)
    ?.trim();
  if (query !== undefined && (searchItems(world, query).total as number) === 0)
    return single({ kind: 'unknown_item', query });

  if (/真人|机器人|\bai\b|数字人|虚拟/i.test(text)) return single({ kind: 'chit_chat', topic: 'is_real' });
  if (/谢谢|已下单|拍了|下单了/.test(text)) return single({ kind: 'chit_chat', topic: 'thanks' });
  if (/好看|好听|漂亮|会讲|可爱|讲得好/.test(text)) return single({ kind: 'chit_chat', topic: 'compliment' });
  if (/晚上好|早上好|下午好|来了|哈喽|你好|第一次来|刚进来/.test(text))
    return single({ kind: 'chit_chat', topic: 'greeting' });
  return undefined;
}

function single(intent: SimpleIntent): Classification {
  return { category: categoryOfKind[intent.kind], intent };
}
