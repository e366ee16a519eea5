import { Rng } from '../../random/rng';
import {
  apparelSizes,
  brandFirstSyllables,
  brandSecondSyllables,
  campaignGifts,
  campaignNames,
  campaignTalkingPoints,
  carriers,
  hostNames,
  hostStyles,
  remoteRegionPool,
  shopSuffixes,
  subcategoryTemplates,
  type PolicyProfile,
  type SpecOption,
  type SubcategoryTemplate,
} from './catalog-vocabulary';
import { cjkHeavyCampaign, cjkHeavyHostStyle, cjkHeavyItem, cjkHeavyPolicy } from './cjk-heavy-text';
import type {
  AfterSalesPolicy,
  Campaign,
  Coupon,
  Item,
  RoomSnapshot,
  ShippingRule,
  Shop,
  SizeChartRow,
  Sku,
} from './room-snapshot';
import type { TextStyle } from './text-style';
import { createWorld, formatYuan, roundCents, type World } from './world';

export interface GenerateWorldOptions {
  seed: string | number;
  /** Catalog size, 1 to 100,000. Default 2,000. */
  itemCount?: number;
  /** Links in the live room's shopping bag. Default 30 (fewer when the catalog is smaller). */
  bagSize?: number;
  /** Scene time (ISO). Default: 20:00 Beijing time on a date derived from the seed. */
  now?: string;
  /**
   * `cjk-heavy`: the same world with production-like text (long titles, spec values, selling
   * points, policy notes, campaign scripts; see cjk-heavy-text.ts), drawn from streams of its
   * own so every other draw is the default world's. Default `default`.
   */
  text?: TextStyle;
}

export const maxWorldItems = 100_000;
const hourMs = 3_600_000;

/**
 * A seeded live-room world: catalog, shops, coupons, shipping and after-sales rules, a shopping
 * bag, a campaign timeline (one ended, one active, one upcoming) and a host persona.
 * Items are drawn in order from one stream, so a bigger catalog extends a smaller one of the
 * same seed (the first N items are identical).
 */
export function generateWorld(options: GenerateWorldOptions): World {
  return createWorld(generateRoomSnapshot(options));
}

export function generateRoomSnapshot(options: GenerateWorldOptions): RoomSnapshot {
  const itemCount = options.itemCount ?? 2000;
  if (!Number.isInteger(itemCount) || itemCount < 1 || itemCount > maxWorldItems) {
    throw new RangeError(`itemCount must be an integer from 1 to ${maxWorldItems}, got ${itemCount}`);
  }
  const rng = new Rng(`world/${options.seed}`);
  const cjkHeavy = options.text === 'cjk-heavy';
  const idBase = 600_000_000_000 + rng.fork('id-base').int(0, 9_999) * 100_000;
  const shippingRules = generateShippingRules(rng.fork('shipping'));
  const policies = generatePolicies(rng.fork('policies'), cjkHeavy ? rng.fork('text/policies') : undefined);
  const brands = generateBrands(rng.fork('brands'));

  const plans = planTemplates(shippingRules, policies);
  const charts = sizeCharts();
  const items: Item[] = new Array(itemCount);
  const usedBrands = new Set<number>();
  // One sequential stream: item i still depends only on (seed, i) because it is drawn after
  // items 0..i-1 whatever the catalog size, and a fork per item (a sha256 each) would double the
  // cost of a 100,000-item catalog.
  const itemRng = rng.fork('items');
  // Item text has a sequential stream of its own too: item i's text depends only on (seed, i).
  const itemTextRng = cjkHeavy ? rng.fork('text/items') : undefined;
  for (let index = 0; index < itemCount; index++) {
    const plan = plans[index % plans.length];
    const brandIndex = itemRng.int(0, brands.length - 1);
    usedBrands.add(brandIndex);
    const item = generateItem(
      itemRng,
      String(idBase + index),
      plan,
      brands[brandIndex],
      `shop-${brandIndex + 1}`,
      charts,
    );
    items[index] = itemTextRng !== undefined ? cjkHeavyItem(item, plan.template, itemTextRng) : item;
  }
  const shops: Shop[] = [...usedBrands]
    .sort((a, b) => a - b)
    .map((brandIndex) => ({
      shopId: `shop-${brandIndex + 1}`,
      name: `${brands[brandIndex]}${shopSuffixes[brandIndex % shopSuffixes.length]}`,
    }));

  const nowMs = options.now !== undefined ? Date.parse(options.now) : defaultNow(rng.fork('now'));
  if (Number.isNaN(nowMs)) throw new RangeError(`now must be an ISO timestamp, got ${options.now}`);
  const bagRng = rng.fork('bag');
  const bagSize = Math.min(options.bagSize ?? 30, itemCount);
  const bagItems = bagRng.sample(items, bagSize);
  const links = bagItems.map((item, index) => ({ linkNo: index + 1, itemId: item.itemId }));
  let campaigns = generateCampaigns(rng.fork('campaigns'), nowMs);
  if (cjkHeavy) {
    const textRng = rng.fork('text/campaigns');
    campaigns = campaigns.map((campaign) => cjkHeavyCampaign(campaign, textRng));
  }
  const coupons = [
    ...platformCoupons(),
    ...shops.flatMap((shop) => shopCoupons(rng.fork(`coupons/${shop.shopId}`), shop.shopId)),
    ...campaigns.map((campaign, index) =>
      liveCoupon(
        rng.fork(`live-coupon/${index}`),
        campaign,
        links.map((link) => link.itemId),
      ),
    ),
  ];
  const hostRng = rng.fork('host');
  const host = { name: hostRng.pick(hostNames), style: hostRng.pick(hostStyles) };
  return {
    roomId: `room-${rng.fork('room').int(100000, 999999)}`,
    host: cjkHeavy ? { ...host, style: cjkHeavyHostStyle(host.style) } : host,
    now: new Date(nowMs).toISOString(),
    featuredItemId: bagItems[0]?.itemId,
    links,
    campaigns,
    items,
    shops,
    coupons,
    shippingRules,
    policies,
  };
}

function defaultNow(rng: Rng): number {
  // 20:00 Beijing time (12:00 UTC), a prime-time slot, on a day in 2025.
  return Date.UTC(2025, 0, 1, 12) + rng.int(0, 364) * 24 * hourMs;
}

function generateBrands(rng: Rng): string[] {
  const all: string[] = [];
  for (const first of brandFirstSyllables) for (const second of brandSecondSyllables) all.push(`${first}${second}`);
  return rng.shuffle(all);
}

/** What every item of one template shares, computed once per catalog rather than per item. */
interface TemplatePlan {
  template: SubcategoryTemplate;
  specEntries: Array<[string, string[]]>;
  specOptions: SpecOption[];
  specOptionsLabel: string;
  shippingRuleIds: string[];
  policyIds: string[];
}

function planTemplates(shippingRules: ShippingRule[], policies: AfterSalesPolicy[]): TemplatePlan[] {
  return subcategoryTemplates.map((template) => {
    const specOptions = template.specOptions?.[0] ?? [];
    return {
      template,
      specEntries: Object.entries(template.specs),
      specOptions,
      specOptionsLabel: specOptions.map((option) => option.label).join(' / '),
      shippingRuleIds: shippingRules
        .filter((rule) => (template.profile === 'fresh') === rule.ruleId.startsWith('ship-cold'))
        .map((rule) => rule.ruleId),
      policyIds: policies
        .filter((policy) => policy.policyId.startsWith(`policy-${template.profile}-`))
        .map((policy) => policy.policyId),
    };
  });
}

function generateItem(
  rng: Rng,
  itemId: string,
  plan: TemplatePlan,
  brand: string,
  shopId: string,
  charts: SizeChartRow[][],
): Item {
  const { template, specOptions } = plan;
  const modifier = rng.pick(template.modifiers);
  const suffix = rng.pick(template.suffixes);
  const basePrice = marketingPrice(
    rng.int(template.priceRange[0], template.priceRange[1]),
    template.priceRange[1] < 150,
  );
  const listPrice = marketingPrice(basePrice * (1.2 + rng.next() * 0.8), false);

  const specs: Record<string, string> = {};
  for (const [key, values] of plan.specEntries) specs[key] = rng.pick(values);
  if (specOptions.length > 0) specs['可选规格'] = plan.specOptionsLabel;
  const [minColors, maxColors] = template.colors ?? [0, 0];
  const colors: Array<string | undefined> =
    template.colorPool && maxColors > 0 ? rng.sample(template.colorPool, rng.int(minColors, maxColors)) : [undefined];
  const sizes: ReadonlyArray<string | undefined> = template.sized ? apparelSizes : [undefined];
  const options: Array<SpecOption | undefined> = specOptions.length > 0 ? specOptions : [undefined];

  const skus: Sku[] = [];
  let lowest = Number.POSITIVE_INFINITY;
  for (const size of sizes) {
    for (const color of colors) {
      for (const option of options) {
        const sku: Sku = {
          skuId: `${itemId}-${skus.length + 1}`,
          price: roundCents(basePrice + (option?.priceDelta ?? 0)),
          stock: stockLevel(rng),
        };
        if (size !== undefined) sku.size = size;
        if (color !== undefined) sku.color = color;
        if (option !== undefined) sku.spec = option.label;
        if (sku.price < lowest) lowest = sku.price;
        skus.push(sku);
      }
    }
  }

  const item: Item = {
    itemId,
    title: `${brand} ${modifier}${template.name}${suffix}`,
    shortName: `${brand}${template.name}`,
    brand,
    category: template.category,
    subcategory: template.name,
    shopId,
    listPrice,
    price: lowest,
    specs,
    sellingPoints: rng.sample(template.sellingPoints, 2),
    skus,
    shippingRuleId: rng.pick(plan.shippingRuleIds),
    policyId: rng.pick(plan.policyIds),
    monthlySales: Math.round(rng.exponential(1 / 3000)),
  };
  if (template.sized) {
    // Charts are shared between items (read-only): one per (menswear, chest allowance).
    item.sizeChart = charts[(suffix.includes('男') ? 4 : 0) + rng.int(0, 3)];
    item.sizeFit = rng.weighted(['small', 'true', 'large'] as const, [1, 3, 1]);
  }
  return item;
}

/** Prices end the way shops price them: 299, 1299, 59.9. */
function marketingPrice(raw: number, allowDecimal: boolean): number {
  if (allowDecimal && raw < 100) return Math.max(9.9, Math.floor(raw / 10) * 10 + 9.9);
  if (raw < 1000) return Math.max(19, Math.floor(raw / 10) * 10 + 9);
  return Math.floor(raw / 100) * 100 + 99;
}

function stockLevel(rng: Rng): number {
  const roll = rng.next();
  if (roll < 0.12) return 0;
  if (roll < 0.3) return rng.int(1, 9);
  return rng.int(20, 2000);
}

const baseSizeChart: Array<[string, number, number, number, number, number, number]> = [
  // size, height min/max cm, weight min/max kg, chest cm, length cm
  ['S', 150, 158, 40, 48, 96, 64],
  ['M', 158, 165, 48, 55, 100, 66],
  ['L', 165, 172, 55, 63, 104, 68],
  ['XL', 172, 178, 63, 72, 108, 70],
  ['XXL', 178, 186, 72, 85, 112, 72],
];

/** Size charts indexed by (menswear ? 4 : 0) + chest allowance step (0..3). */
function sizeCharts(): SizeChartRow[][] {
  const charts: SizeChartRow[][] = [];
  for (const menswear of [false, true]) for (let step = 0; step < 4; step++) charts.push(sizeChart(menswear, step * 2));
  return charts;
}

function sizeChart(menswear: boolean, chestExtra: number): SizeChartRow[] {
  const shift = menswear ? 5 : 0;
  return baseSizeChart.map(([size, heightMin, heightMax, weightMin, weightMax, chest, length]) => ({
    size,
    heightMinCm: heightMin + shift,
    heightMaxCm: heightMax + shift,
    weightMinKg: weightMin + shift,
    weightMaxKg: weightMax + shift,
    chestCm: chest + chestExtra,
    lengthCm: length,
  }));
}

function generateShippingRules(rng: Rng): ShippingRule[] {
  const rules: ShippingRule[] = [];
  for (let index = 1; index <= 8; index++) {
    const surcharge = rng.pick([10, 15, 20, null]);
    rules.push({
      ruleId: `ship-${index}`,
      freeShippingThreshold: rng.pick([0, 0, 49, 59, 99]),
      baseFee: rng.pick([6, 8, 10]),
      dispatchHours: rng.pick([24, 48, 48, 72]),
      carrier: rng.pick(carriers),
      remoteRegions: rng.sample(remoteRegionPool, rng.int(3, 6)).sort(),
      remoteSurcharge: surcharge,
    });
  }
  for (let index = 1; index <= 2; index++) {
    rules.push({
      ruleId: `ship-cold-${index}`,
      freeShippingThreshold: 0,
      baseFee: 0,
      dispatchHours: 24,
      carrier: '顺丰冷链',
      remoteRegions: rng.sample(remoteRegionPool, rng.int(4, 7)).sort(),
      remoteSurcharge: null,
    });
  }
  return rules;
}

interface PolicyProfileSpec {
  returnDays: number[];
  returnNote: string;
  warrantyMonths: number[];
  warrantyNote: string;
  specialInvoice: boolean;
}

const policyProfiles: Record<PolicyProfile, PolicyProfileSpec> = {
  apparel: {
    returnDays: [7, 15],
    returnNote: '吊牌完好、不影响二次销售即可退换',
    warrantyMonths: [0],
    warrantyNote: '服装不涉及保修，质量问题30天内包退换',
    specialInvoice: false,
  },
  beauty: {
    returnDays: [7],
    returnNote: '未拆封支持无理由退货，拆封后不支持',
    warrantyMonths: [0],
    warrantyNote: '化妆品不涉及保修，如有过敏请联系客服处理',
    specialInvoice: false,
  },
  fresh: {
    returnDays: [0],
    returnNote: '生鲜易腐商品不支持7天无理由退货，签收24小时内拍照反馈坏果/死蟹包赔',
    warrantyMonths: [0],
    warrantyNote: '生鲜商品不涉及保修',
    specialInvoice: false,
  },
  packaged_food: {
    returnDays: [7],
    returnNote: '未拆封支持无理由退货，拆封后不支持',
    warrantyMonths: [0],
    warrantyNote: '食品不涉及保修，质量问题包退',
    specialInvoice: false,
  },
  digital: {
    returnDays: [7],
    returnNote: '未激活、包装配件齐全支持无理由退货',
    warrantyMonths: [12, 24],
    warrantyNote: '全国联保，非人为损坏免费维修',
    specialInvoice: true,
  },
  appliance: {
    returnDays: [7],
    returnNote: '未使用、包装完好支持无理由退货',
    warrantyMonths: [12, 24, 36],
    warrantyNote: '整机保修，非人为损坏免费上门维修',
    specialInvoice: true,
  },
  textile: {
    returnDays: [7, 15],
    returnNote: '未洗涤、包装完好即可退换',
    warrantyMonths: [0],
    warrantyNote: '家纺不涉及保修，质量问题30天内包换',
    specialInvoice: false,
  },
  houseware: {
    returnDays: [7],
    returnNote: '未使用、包装完好即可退换',
    warrantyMonths: [0, 12],
    warrantyNote: '质量问题免费换新',
    specialInvoice: false,
  },
};

/** The after-sales policies; with `textRng`, their notes in production length (cjkHeavyPolicy). */
function generatePolicies(rng: Rng, textRng?: Rng): AfterSalesPolicy[] {
  const policies: AfterSalesPolicy[] = [];
  for (const [profile, spec] of Object.entries(policyProfiles) as Array<[PolicyProfile, PolicyProfileSpec]>) {
    for (let variant = 1; variant <= 3; variant++) {
      const returnDays = rng.pick(spec.returnDays);
      const policy: AfterSalesPolicy = {
        policyId: `policy-${profile}-${variant}`,
        returnDays,
        returnNote: returnDays > 0 ? `支持${returnDays}天无理由退货，${spec.returnNote}` : spec.returnNote,
        returnShippingInsurance: returnDays > 0 && rng.chance(0.6),
        warrantyMonths: rng.pick(spec.warrantyMonths),
        warrantyNote: spec.warrantyNote,
        invoiceTypes: spec.specialInvoice && rng.chance(0.6) ? ['电子普通发票', '增值税专用发票'] : ['电子普通发票'],
        priceProtectionDays: rng.pick([0, 0, 15, 30]),
      };
      policies.push(textRng !== undefined ? cjkHeavyPolicy(policy, profile, textRng) : policy);
    }
  }
  return policies;
}

function generateCampaigns(rng: Rng, nowMs: number): Campaign[] {
  const names = rng.sample(campaignNames, 3);
  const windows: Array<[number, number]> = [
    [nowMs - 30 * hourMs, nowMs - 26 * hourMs],
    [nowMs - rng.int(1, 3) * hourMs, nowMs + rng.int(1, 3) * hourMs],
    [nowMs + 22 * hourMs, nowMs + 26 * hourMs],
  ];
  return windows.map(([start, end], index) => ({
    campaignId: `campaign-${index + 1}`,
    name: names[index],
    startsAt: new Date(start).toISOString(),
    endsAt: new Date(end).toISOString(),
    couponId: `coupon-live-${index + 1}`,
    talkingPoints: rng.sample(campaignTalkingPoints, 2),
    ...(rng.chance(0.5) ? { gift: rng.pick(campaignGifts) } : {}),
  }));
}

function platformCoupons(): Coupon[] {
  return [
    { couponId: 'coupon-platform-1', name: '平台跨店满300减50', type: 'platform', threshold: 300, amount: 50 },
    { couponId: 'coupon-platform-2', name: '平台满199减20', type: 'platform', threshold: 199, amount: 20 },
    {
      couponId: 'coupon-platform-3',
      name: '美妆个护满200减30',
      type: 'platform',
      threshold: 200,
      amount: 30,
      categories: ['beauty'],
    },
    { couponId: 'coupon-platform-4', name: '平台无门槛5元券', type: 'platform', threshold: 0, amount: 5 },
  ];
}

function shopCoupons(rng: Rng, shopId: string): Coupon[] {
  const offers: Array<[number, number]> = [
    [99, 10],
    [199, 30],
    [299, 50],
    [0, 5],
    [0, 10],
    [500, 80],
  ];
  return rng.sample(offers, rng.int(0, 2)).map(([threshold, amount], index) => ({
    couponId: `coupon-${shopId}-${index + 1}`,
    name: threshold > 0 ? `店铺满${threshold}减${amount}` : `店铺无门槛${amount}元券`,
    type: 'shop' as const,
    threshold,
    amount,
    shopId,
  }));
}

function liveCoupon(rng: Rng, campaign: Campaign, itemIds: string[]): Coupon {
  const [threshold, amount] = rng.pick<[number, number]>([
    [300, 50],
    [199, 40],
    [0, 20],
    [150, 30],
    [399, 60],
  ]);
  return {
    couponId: campaign.couponId!,
    name:
      threshold > 0
        ? `直播间专享满${formatYuan(threshold)}减${formatYuan(amount)}券`
        : `直播间专享无门槛${formatYuan(amount)}元券`,
    type: 'shop',
    threshold,
    amount,
    itemIds,
    campaignId: campaign.campaignId,
  };
}
