import type { ToolCapability } from '../../harness/harness-types';
import { compactText } from '../text/normalize-text';
import { quotePrice, stackingRule } from '../world/price-quote';
import type { Category, Item, ShippingRule, SizeChartRow, Sku } from '../world/room-snapshot';
import { couponAppliesTo, couponLabel, formatYuan, type World } from '../world/world';
import type { PolicyTopic } from './capability-arguments';
import { toolFailure, type ToolFailure } from './tool-error';

/**
 * Every capability implemented once against the world. Inputs are canonical arguments already
 * checked by `checkArguments`; results are plain JSON objects (snake_case, Chinese values, what
 * a shop API would return); bad references come back as ToolFailure, never as exceptions.
 */
export type CapabilityResult = Record<string, unknown> | ToolFailure;
type Arguments = Record<string, unknown>;

export const categoryLabels: Record<Category, string> = {
  apparel: '服饰',
  beauty: '美妆',
  food: '食品',
  electronics: '数码',
  home: '家居',
};

export const capabilityHandlers: Record<ToolCapability, (world: World, args: Arguments) => CapabilityResult> = {
  item_detail: (world, args) => withItem(world, args.item_id, (item) => itemDetail(world, item)),
  item_search: (world, args) =>
    searchItems(
      world,
      args.query as string,
      args.category as Category | undefined,
      args.max_price as number | undefined,
      (args.limit as number | undefined) ?? 5,
    ),
  sku_stock: (world, args) =>
    withItem(world, args.item_id, (item) =>
      skuStock(item, args.size as string | undefined, args.color as string | undefined),
    ),
  promotions: (world, args) =>
    args.item_id === undefined ? promotions(world) : withItem(world, args.item_id, (item) => promotions(world, item)),
  policy: (world, args) => policy(world, args.topic as PolicyTopic, args.item_id as string | undefined),
  size_recommendation: (world, args) =>
    withItem(world, args.item_id, (item) => recommendSize(item, args.height_cm as number, args.weight_kg as number)),
  item_comparison: (world, args) => compareItems(world, args.item_ids as string[]),
  live_script: (world) => liveScript(world),
  price_quote: (world, args) =>
    withItem(world, args.item_id, (item) =>
      priceQuote(world, item, (args.quantity as number | undefined) ?? 1, args.sku_id as string | undefined),
    ),
};

function withItem(world: World, itemId: unknown, run: (item: Item) => CapabilityResult): CapabilityResult {
  const item = world.itemsById.get(itemId as string);
  if (item === undefined)
    return toolFailure(
      'ITEM_NOT_FOUND',
      `no item with id ${JSON.stringify(itemId)} in this live room; use item search or the live script to find item ids`,
    );
  return run(item);
}

function skuOptions(item: Item): Record<string, string[]> {
  const options: Record<string, string[]> = {};
  for (const key of ['size', 'color', 'spec'] as const) {
    const values = [
      ...new Set(item.skus.map((sku) => sku[key]).filter((value): value is string => value !== undefined)),
    ];
    if (values.length > 0) options[`${key}s`] = values;
  }
  return options;
}

function itemDetail(world: World, item: Item): Record<string, unknown> {
  const link = world.linkByItemId.get(item.itemId);
  return {
    item_id: item.itemId,
    title: item.title,
    short_name: item.shortName,
    brand: item.brand,
    category: categoryLabels[item.category],
    price: item.price,
    list_price: item.listPrice,
    price_note: item.skus.some((sku) => sku.price !== item.price)
      ? `${formatYuan(item.price)}元起，不同规格价格不同`
      : '直播间现价，未含优惠券',
    ...(link !== undefined ? { link_no: link } : {}),
    is_featured: world.snapshot.featuredItemId === item.itemId,
    specs: item.specs,
    selling_points: item.sellingPoints,
    options: skuOptions(item),
    has_size_chart: item.sizeChart !== undefined,
    shop: world.shopsById.get(item.shopId)?.name ?? item.shopId,
    monthly_sales: item.monthlySales,
  };
}

/**
 * Relevance: the query contained in the title or short name, the brand or product noun
 * contained in the query, or most of the query's character pairs found in the title.
 */
function searchScore(item: Item, query: string): number {
  const title = compactText(item.title);
  let score = 0;
  if (title.includes(query) || compactText(item.shortName).includes(query)) score += 3;
  if (query.includes(compactText(item.brand))) score += 2;
  if (query.includes(compactText(item.subcategory))) score += 2;
  if (score === 0 && query.length >= 3) {
    let found = 0;
    for (let index = 0; index < query.length - 1; index++) if (title.includes(query.slice(index, index + 2))) found++;
    if (found / (query.length - 1) >= 0.6) score += 2;
  }
  return score;
}

/** Search over the world's catalog (for a task, the room's shopping bag). Exported for task generation checks. */
export function searchItems(
  world: World,
  rawQuery: string,
  category?: Category,
  maxPrice?: number,
  limit = 5,
): Record<string, unknown> {
  const query = compactText(rawQuery);
  const scored: Array<{ item: Item; score: number }> = [];
  for (const item of world.snapshot.items) {
    if (category !== undefined && item.category !== category) continue;
    if (maxPrice !== undefined && item.price > maxPrice) continue;
    const score = searchScore(item, query);
    if (score >= 2) scored.push({ item, score });
  }
  scored.sort(
    (a, b) =>
      b.score - a.score || b.item.monthlySales - a.item.monthlySales || (a.item.itemId < b.item.itemId ? -1 : 1),
  );
  return {
    query: rawQuery,
    total: scored.length,
    items: scored.slice(0, limit).map(({ item }) => {
      const link = world.linkByItemId.get(item.itemId);
      return {
        item_id: item.itemId,
        title: item.title,
        short_name: item.shortName,
        price: item.price,
        ...(link !== undefined ? { link_no: link } : {}),
      };
    }),
    ...(scored.length === 0 ? { note: '直播间没有找到相关商品' } : {}),
  };
}

export function stockStatus(stock: number): string {
  if (stock === 0) return '已售罄';
  if (stock < 10) return '库存紧张';
  return '有货';
}

const colorStem = (color: string) => compactText(color).replace(/色$/, '');

/**
 * Which of an item's colors a viewer's word names: the one it spells (白 or 白色 for 白色, never
 * 奶白色 beside it), else every color that contains it (黑 for 黑色, 蓝色 for 雾霾蓝).
 */
function colorMatcher(colors: readonly string[], asked: string): (skuColor: string) => boolean {
  const wanted = colorStem(asked);
  if (colors.some((color) => colorStem(color) === wanted)) return (skuColor) => colorStem(skuColor) === wanted;
  return (skuColor) => compactText(skuColor).includes(wanted);
}

function skuStock(item: Item, size?: string, color?: string): CapabilityResult {
  const options = skuOptions(item);
  if (size !== undefined) {
    if (options.sizes === undefined)
      return toolFailure('OPTION_NOT_FOUND', `item ${item.itemId} has no sizes; leave the size out`);
    if (!options.sizes.some((value) => compactText(value) === compactText(size))) {
      return toolFailure(
        'OPTION_NOT_FOUND',
        `item ${item.itemId} has no size ${JSON.stringify(size)}; sizes: ${options.sizes.join(', ')}`,
      );
    }
  }
  let colorMatches: ((skuColor: string) => boolean) | undefined;
  if (color !== undefined) {
    if (options.colors === undefined)
      return toolFailure('OPTION_NOT_FOUND', `item ${item.itemId} has no color options; leave the color out`);
    colorMatches = colorMatcher(options.colors, color);
    if (!options.colors.some(colorMatches)) {
      return toolFailure(
        'OPTION_NOT_FOUND',
        `item ${item.itemId} has no color ${JSON.stringify(color)}; colors: ${options.colors.join(', ')}`,
      );
    }
  }
  const skus = item.skus.filter(
    (sku) =>
      (size === undefined || compactText(sku.size ?? '') === compactText(size)) &&
      (colorMatches === undefined || colorMatches(sku.color ?? '')),
  );
  return {
    item_id: item.itemId,
    short_name: item.shortName,
    skus: skus.map((sku) => ({ ...skuWire(sku), stock: sku.stock, status: stockStatus(sku.stock) })),
    total_stock: skus.reduce((sum, sku) => sum + sku.stock, 0),
  };
}

function skuWire(sku: Sku): Record<string, unknown> {
  return {
    sku_id: sku.skuId,
    ...(sku.size !== undefined ? { size: sku.size } : {}),
    ...(sku.color !== undefined ? { color: sku.color } : {}),
    ...(sku.spec !== undefined ? { spec: sku.spec } : {}),
    price: sku.price,
  };
}

function promotions(world: World, item?: Item): Record<string, unknown> {
  const campaign = world.activeCampaign;
  const usable = world.snapshot.coupons.filter((coupon) =>
    item !== undefined
      ? couponAppliesTo(world, coupon, item)
      : coupon.type === 'platform'
        ? coupon.categories === undefined
        : coupon.campaignId !== undefined && coupon.campaignId === campaign?.campaignId,
  );
  return {
    ...(item !== undefined ? { item_id: item.itemId, price: item.price } : {}),
    campaign:
      campaign === undefined
        ? null
        : {
            name: campaign.name,
            ends_at: campaign.endsAt,
            ...(campaign.gift !== undefined ? { gift: campaign.gift } : {}),
          },
    live_coupon:
      world.activeCoupon === undefined
        ? null
        : { name: world.activeCoupon.name, label: couponLabel(world.activeCoupon) },
    coupons: usable.map((coupon) => ({
      coupon_id: coupon.couponId,
      name: coupon.name,
      type: coupon.type === 'platform' ? '平台券' : '店铺券',
      threshold: coupon.threshold,
      amount: coupon.amount,
      label: couponLabel(coupon),
    })),
    stacking_rule: stackingRule,
  };
}

export function freeShippingText(rule: ShippingRule): string {
  return rule.freeShippingThreshold === 0
    ? '全场包邮'
    : `满${formatYuan(rule.freeShippingThreshold)}元包邮，不满收运费${formatYuan(rule.baseFee)}元`;
}

export function remoteRuleText(rule: ShippingRule): string {
  const regions = rule.remoteRegions.join('、');
  return rule.remoteSurcharge === null
    ? `${regions}暂不发货`
    : `${regions}不包邮，需补运费${formatYuan(rule.remoteSurcharge)}元`;
}

function policy(world: World, topic: PolicyTopic, itemId?: string): CapabilityResult {
  const resolvedId = itemId ?? world.snapshot.featuredItemId;
  if (resolvedId === undefined)
    return toolFailure('MISSING_ARGUMENT', 'no item is being featured; pass the item id whose policy you need');
  const item = world.itemsById.get(resolvedId);
  if (item === undefined)
    return toolFailure('ITEM_NOT_FOUND', `no item with id ${JSON.stringify(resolvedId)} in this live room`);
  const base = {
    topic,
    item_id: item.itemId,
    short_name: item.shortName,
    ...(itemId === undefined ? { note: '未指定商品，返回当前讲解商品的规则' } : {}),
  };
  if (topic === 'shipping') {
    const rule = world.shippingRulesById.get(item.shippingRuleId);
    if (rule === undefined) return toolFailure('ITEM_NOT_FOUND', `item ${item.itemId} has no shipping rule on record`);
    return {
      ...base,
      free_shipping: freeShippingText(rule),
      free_shipping_threshold: rule.freeShippingThreshold,
      base_fee: rule.baseFee,
      dispatch: `付款后${rule.dispatchHours}小时内发货`,
      dispatch_hours: rule.dispatchHours,
      carrier: rule.carrier,
      remote_regions: rule.remoteRegions,
      remote_rule: remoteRuleText(rule),
    };
  }
  const terms = world.policiesById.get(item.policyId);
  if (terms === undefined)
    return toolFailure('ITEM_NOT_FOUND', `item ${item.itemId} has no after-sales policy on record`);
  switch (topic) {
    case 'returns':
      return {
        ...base,
        return_days: terms.returnDays,
        no_reason_return: terms.returnDays > 0 ? `支持${terms.returnDays}天无理由退货` : '不支持7天无理由退货',
        note: terms.returnNote,
        shipping_insurance: terms.returnShippingInsurance ? '赠送运费险' : '不含运费险',
        price_protection: terms.priceProtectionDays > 0 ? `${terms.priceProtectionDays}天保价` : '不保价',
      };
    case 'warranty':
      return {
        ...base,
        warranty_months: terms.warrantyMonths,
        warranty: terms.warrantyMonths > 0 ? `保修${terms.warrantyMonths}个月` : '不涉及保修',
        note: terms.warrantyNote,
      };
    case 'invoice':
      return { ...base, invoice_types: terms.invoiceTypes, note: '确认收货后在订单详情页申请开票' };
  }
}

/**
 * The size for a height and weight: the chart row each falls in (the larger when they
 * disagree), one size up when the item runs small and one down when it runs large.
 */
export function recommendSizeRow(
  chart: SizeChartRow[],
  fit: Item['sizeFit'],
  heightCm: number,
  weightKg: number,
): { row: SizeChartRow; outOfChart: boolean } {
  const indexOf = (value: number, min: (row: SizeChartRow) => number, max: (row: SizeChartRow) => number): number => {
    const found = chart.findIndex((row) => value < max(row));
    return found === -1 ? chart.length - 1 : found;
  };
  const heightIndex = indexOf(
    heightCm,
    (row) => row.heightMinCm,
    (row) => row.heightMaxCm,
  );
  const weightIndex = indexOf(
    weightKg,
    (row) => row.weightMinKg,
    (row) => row.weightMaxKg,
  );
  const shift = fit === 'small' ? 1 : fit === 'large' ? -1 : 0;
  const index = Math.min(chart.length - 1, Math.max(0, Math.max(heightIndex, weightIndex) + shift));
  const first = chart[0];
  const last = chart[chart.length - 1];
  const outOfChart =
    heightCm < first.heightMinCm ||
    heightCm > last.heightMaxCm ||
    weightKg < first.weightMinKg ||
    weightKg > last.weightMaxKg;
  return { row: chart[index], outOfChart };
}

function recommendSize(item: Item, heightCm: number, weightKg: number): CapabilityResult {
  if (item.sizeChart === undefined)
    return toolFailure(
      'NO_SIZE_CHART',
      `item ${item.itemId} (${item.shortName}) has no sizes, so no size recommendation applies`,
    );
  const { row, outOfChart } = recommendSizeRow(item.sizeChart, item.sizeFit, heightCm, weightKg);
  const fitText =
    item.sizeFit === 'small' ? '偏小，建议拍大一码' : item.sizeFit === 'large' ? '偏大，建议拍小一码' : '标准尺码';
  return {
    item_id: item.itemId,
    short_name: item.shortName,
    recommended_size: row.size,
    fit: fitText,
    chart_row: {
      size: row.size,
      height_cm: `${row.heightMinCm}-${row.heightMaxCm}`,
      weight_kg: `${row.weightMinKg}-${row.weightMaxKg}`,
      chest_cm: row.chestCm,
      length_cm: row.lengthCm,
    },
    ...(outOfChart ? { note: '身高体重超出尺码表范围，建议联系客服确认' } : {}),
  };
}

function compareItems(world: World, itemIds: string[]): CapabilityResult {
  const items: Item[] = [];
  for (const itemId of itemIds) {
    const item = world.itemsById.get(itemId);
    if (item === undefined)
      return toolFailure('ITEM_NOT_FOUND', `no item with id ${JSON.stringify(itemId)} in this live room`);
    items.push(item);
  }
  const cheapest = items.reduce((best, item) => (item.price < best.price ? item : best));
  const prices = items.map((item) => item.price);
  return {
    items: items.map((item) => ({
      item_id: item.itemId,
      short_name: item.shortName,
      title: item.title,
      price: item.price,
      list_price: item.listPrice,
      key_specs: Object.fromEntries(Object.entries(item.specs).slice(0, 3)),
      selling_point: item.sellingPoints[0],
    })),
    cheapest: { item_id: cheapest.itemId, short_name: cheapest.shortName, price: cheapest.price },
    price_difference: Math.round((Math.max(...prices) - Math.min(...prices)) * 100) / 100,
  };
}

function liveScript(world: World): Record<string, unknown> {
  const { snapshot } = world;
  const featured = snapshot.featuredItemId !== undefined ? world.itemsById.get(snapshot.featuredItemId) : undefined;
  const campaign = world.activeCampaign;
  const nowMs = Date.parse(snapshot.now);
  const upcoming = snapshot.campaigns
    .filter((entry) => Date.parse(entry.startsAt) > nowMs)
    .sort((a, b) => a.startsAt.localeCompare(b.startsAt))[0];
  return {
    room_id: snapshot.roomId,
    host: snapshot.host.name,
    featured_item:
      featured === undefined
        ? null
        : {
            item_id: featured.itemId,
            short_name: featured.shortName,
            link_no: world.linkByItemId.get(featured.itemId) ?? null,
            price: featured.price,
          },
    campaign:
      campaign === undefined
        ? null
        : {
            name: campaign.name,
            ends_at: campaign.endsAt,
            talking_points: campaign.talkingPoints,
            ...(campaign.gift !== undefined ? { gift: campaign.gift } : {}),
            coupon:
              world.activeCoupon === undefined
                ? null
                : { name: world.activeCoupon.name, label: couponLabel(world.activeCoupon) },
          },
    ...(upcoming !== undefined ? { next_campaign: { name: upcoming.name, starts_at: upcoming.startsAt } } : {}),
    links: snapshot.links.map((link) => {
      const item = world.itemsById.get(link.itemId);
      return { link_no: link.linkNo, item_id: link.itemId, short_name: item?.shortName, price: item?.price };
    }),
  };
}

function priceQuote(world: World, item: Item, quantity: number, skuId?: string): CapabilityResult {
  let sku: Sku | undefined;
  if (skuId !== undefined) {
    sku = item.skus.find((candidate) => candidate.skuId === skuId);
    if (sku === undefined)
      return toolFailure(
        'SKU_NOT_FOUND',
        `item ${item.itemId} has no SKU ${JSON.stringify(skuId)}; get its SKUs from the stock tool`,
      );
  }
  const quote = quotePrice(world, item, quantity, sku);
  return {
    item_id: item.itemId,
    short_name: item.shortName,
    ...(sku !== undefined ? { sku_id: sku.skuId } : {}),
    quantity,
    unit_price: quote.unitPrice,
    subtotal: quote.subtotal,
    coupons_applied: quote.couponsApplied.map((coupon) => ({
      name: coupon.name,
      type: coupon.type === 'platform' ? '平台券' : '店铺券',
      amount: coupon.amount,
    })),
    discount_total: quote.discountTotal,
    final_price: quote.finalPrice,
    final_unit_price: quote.finalUnitPrice,
    shipping_fee: quote.shippingFee,
    stacking_rule: stackingRule,
    ...(sku !== undefined && sku.stock === 0 ? { note: '该规格已售罄' } : {}),
  };
}
