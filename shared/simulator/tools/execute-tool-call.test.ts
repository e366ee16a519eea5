import type { Harness } from '../../harness/harness-types';
import { loadHarness } from '../../harness/load-harness';
import { sampleHarnessDirectory } from '../../harness/sample-harness';
import { renameHarness } from '../testing/renamed-harness';
import { generateRoomSnapshot } from '../world/generate-world';
import type { Item, RoomSnapshot } from '../world/room-snapshot';
import { createWorld, type World } from '../world/world';
import { executeToolCall } from './execute-tool-call';
import { toCanonicalArguments, toToolArguments } from '../../harness/tool-binding';
import { PythonFloat, parseJsonKeepingFloats } from '../../text/python-values';

let harness: Harness;
let renamed: Harness;
let world: World;
let snapshot: RoomSnapshot;
let apparel: Item;
let gadget: Item;

beforeAll(async () => {
  harness = await loadHarness(sampleHarnessDirectory());
  renamed = renameHarness(harness);
  const catalog = generateRoomSnapshot({ seed: 'tools', itemCount: 60, bagSize: 12 });
  // Put an apparel item and an electronics item in the bag, the apparel one on screen.
  apparel = catalog.items.find((item) => item.category === 'apparel')!;
  gadget = catalog.items.find((item) => item.category === 'electronics')!;
  const bag = [apparel, gadget, ...catalog.items.filter((item) => item !== apparel && item !== gadget).slice(0, 4)];
  const bagIds = bag.map((item) => item.itemId);
  snapshot = {
    ...catalog,
    featuredItemId: apparel.itemId,
    links: bagIds.map((itemId, index) => ({ linkNo: index + 1, itemId })),
    coupons: catalog.coupons.map((coupon) =>
      coupon.campaignId !== undefined ? { ...coupon, itemIds: bagIds } : coupon,
    ),
  };
  world = createWorld(snapshot);
});

function run(name: string, args: unknown, under: Harness = harness) {
  const result = executeToolCall(world, under, {
    name,
    arguments: typeof args === 'string' ? args : JSON.stringify(args),
  });
  return { ...result, body: JSON.parse(result.content) as Record<string, any> };
}

describe('capabilities through the sample harness', () => {
  it('get_item_detail returns the item, and ITEM_NOT_FOUND for an unknown id', () => {
    const ok = run('get_item_detail', { item_id: apparel.itemId });
    expect(ok.error).toBeUndefined();
    expect(ok.body).toMatchObject({
      item_id: apparel.itemId,
      short_name: apparel.shortName,
      price: apparel.price,
      link_no: 1,
      is_featured: true,
    });
    expect(ok.body.options.sizes).toEqual(['S', 'M', 'L', 'XL', 'XXL']);
    const missing = run('get_item_detail', { item_id: 'nope' });
    expect(missing.body.error.code).toBe('ITEM_NOT_FOUND');
    expect(missing.issueKind).toBe('tool_error');
  });

  it('search_items finds by name, filters by category and price, and reports no match', () => {
    const found = run('search_items', { query: apparel.shortName });
    expect(found.body.items[0].item_id).toBe(apparel.itemId);
    const filtered = run('search_items', { query: apparel.subcategory, category: 'electronics' });
    expect(filtered.body.total).toBe(0);
    const cheap = run('search_items', { query: apparel.subcategory, max_price: apparel.price - 1 });
    expect(cheap.body.items.every((item: { price: number }) => item.price < apparel.price)).toBe(true);
    const none = run('search_items', { query: '戴森吹风机' });
    expect(none.body).toMatchObject({ total: 0, items: [], note: '直播间没有找到相关商品' });
    expect(run('search_items', { category: 'food' }).body.error.code).toBe('SCHEMA_VIOLATION');
  });

  it('get_sku_stock filters by size and color, and rejects a size the item lacks', () => {
    const color = apparel.skus[0].color!;
    const stock = run('get_sku_stock', { item_id: apparel.itemId, size: 'M', color });
    expect(stock.body.skus).toHaveLength(1);
    const sku = apparel.skus.find((entry) => entry.size === 'M' && entry.color === color)!;
    expect(stock.body.skus[0]).toMatchObject({ sku_id: sku.skuId, stock: sku.stock });
    expect(run('get_sku_stock', { item_id: apparel.itemId, size: 'XXXL' }).body.error.code).toBe('OPTION_NOT_FOUND');
    expect(run('get_sku_stock', { item_id: gadget.itemId, size: 'M' }).body.error.code).toBe('OPTION_NOT_FOUND');
  });

  it('get_sku_stock reads a color by the name it spells (白色 or 白 is not 奶白色), a short form by every color holding it', () => {
    const stock = (colors: string[], asked: string) => {
      const recolored = {
        ...apparel,
        skus: apparel.skus.map((sku, index) => ({ ...sku, color: colors[index % colors.length] })),
      };
      const items = snapshot.items.map((item) => (item === apparel ? recolored : item));
      const result = executeToolCall(createWorld({ ...snapshot, items }), harness, {
        name: 'get_sku_stock',
        arguments: JSON.stringify({ item_id: apparel.itemId, color: asked }),
      });
      const body = JSON.parse(result.content) as { skus: Array<{ color: string; stock: number }>; total_stock: number };
      const expected = (named: string[]) =>
        recolored.skus.filter((sku) => named.includes(sku.color)).reduce((sum, sku) => sum + sku.stock, 0);
      return { colors: [...new Set(body.skus.map((sku) => sku.color))].sort(), total: body.total_stock, expected };
    };
    for (const asked of ['白色', '白']) {
      const { colors, total, expected } = stock(['白色', '奶白色'], asked);
      expect({ asked, colors, total }).toEqual({ asked, colors: ['白色'], total: expected(['白色']) });
    }
    const creamy = stock(['白色', '奶白色'], '奶白');
    expect(creamy).toMatchObject({ colors: ['奶白色'], total: creamy.expected(['奶白色']) });
    const short = stock(['奶白色', '米白色', '黑色'], '白');
    expect(short).toMatchObject({ colors: ['奶白色', '米白色'], total: short.expected(['奶白色', '米白色']) });
  });

  it('get_promotions lists usable coupons with the stacking rule', () => {
    const promotions = run('get_promotions', { item_id: apparel.itemId });
    expect(promotions.body.live_coupon.name).toBe(world.activeCoupon!.name);
    expect(promotions.body.coupons.some((coupon: { name: string }) => coupon.name === world.activeCoupon!.name)).toBe(
      true,
    );
    expect(promotions.body.stacking_rule).toContain('平台券和店铺券可叠加');
    expect(run('get_promotions', { item_id: 'nope' }).body.error.code).toBe('ITEM_NOT_FOUND');
  });

  it('get_after_sales_policy answers each topic and defaults to the featured item', () => {
    const rule = world.shippingRulesById.get(apparel.shippingRuleId)!;
    const shipping = run('get_after_sales_policy', { topic: 'shipping' });
    expect(shipping.body).toMatchObject({
      item_id: apparel.itemId,
      dispatch_hours: rule.dispatchHours,
      remote_regions: rule.remoteRegions,
    });
    const terms = world.policiesById.get(gadget.policyId)!;
    expect(run('get_after_sales_policy', { topic: 'warranty', item_id: gadget.itemId }).body.warranty_months).toBe(
      terms.warrantyMonths,
    );
    expect(run('get_after_sales_policy', { topic: 'returns', item_id: gadget.itemId }).body.return_days).toBe(
      terms.returnDays,
    );
    expect(run('get_after_sales_policy', { topic: 'invoice', item_id: gadget.itemId }).body.invoice_types).toEqual(
      terms.invoiceTypes,
    );
    expect(run('get_after_sales_policy', { topic: 'refund' }).body.error.code).toBe('SCHEMA_VIOLATION');
  });

  it('recommend_size picks from the size chart, and refuses items without one', () => {
    const result = run('recommend_size', { item_id: apparel.itemId, height_cm: 168, weight_kg: 58 });
    const shift = apparel.sizeFit === 'small' ? 1 : apparel.sizeFit === 'large' ? -1 : 0;
    const base = apparel.sizeChart!.findIndex((row) => 168 < row.heightMaxCm && 58 < row.weightMaxKg);
    expect(result.body.recommended_size).toBe(apparel.sizeChart![Math.max(0, Math.min(4, base + shift))].size);
    expect(run('recommend_size', { item_id: gadget.itemId, height_cm: 168, weight_kg: 58 }).body.error.code).toBe(
      'NO_SIZE_CHART',
    );
  });

  it('compare_items names the cheaper item and the price difference', () => {
    const result = run('compare_items', { item_ids: [apparel.itemId, gadget.itemId] });
    const cheaper = apparel.price <= gadget.price ? apparel : gadget;
    expect(result.body.cheapest.item_id).toBe(cheaper.itemId);
    expect(result.body.price_difference).toBeCloseTo(Math.abs(apparel.price - gadget.price), 2);
    expect(run('compare_items', { item_ids: [apparel.itemId, 'ghost'] }).body.error.code).toBe('ITEM_NOT_FOUND');
  });

  it('get_live_script lists the featured item, campaign coupon and every link', () => {
    const script = run('get_live_script', {});
    expect(script.body.featured_item.item_id).toBe(apparel.itemId);
    expect(script.body.campaign.coupon.name).toBe(world.activeCoupon!.name);
    expect(script.body.links).toHaveLength(snapshot.links.length);
    expect(run('get_live_script', '').error).toBeUndefined();
  });

  it('quote_final_price computes the final price, and SKU_NOT_FOUND for a foreign sku', () => {
    const quote = run('quote_final_price', { item_id: gadget.itemId, quantity: 2 });
    expect(quote.body).toMatchObject({
      quantity: 2,
      unit_price: gadget.price,
      subtotal: Math.round(gadget.price * 200) / 100,
    });
    expect(quote.body.final_price).toBeLessThanOrEqual(quote.body.subtotal);
    expect(run('quote_final_price', { item_id: gadget.itemId, sku_id: apparel.skus[0].skuId }).body.error.code).toBe(
      'SKU_NOT_FOUND',
    );
    expect(run('quote_final_price', { item_id: gadget.itemId, quantity: 0 }).body.error.code).toBe('SCHEMA_VIOLATION');
  });
});

describe('malformed calls come back as readable tool errors', () => {
  it('reports invalid JSON, an unknown tool, a non-object and a wrong type', () => {
    const invalid = run('get_item_detail', '{"item_id": "1"');
    expect(invalid).toMatchObject({ issueKind: 'invalid_json', error: { code: 'INVALID_JSON' } });
    const unknown = run('get_weather', {});
    expect(unknown.issueKind).toBe('unknown_tool');
    expect(unknown.body.error.message).toContain('get_item_detail');
    expect(run('get_item_detail', '[1]').body.error.code).toBe('SCHEMA_VIOLATION');
    const wrongType = run('get_item_detail', { item_id: 600000 });
    expect(wrongType.issueKind).toBe('schema_violation');
    expect(wrongType.body.error.message).toContain('/item_id must be string');
  });

  it('checks a schema whose bounds are floats kept as Python reads them (`"minimum": 1.0`)', () => {
    const floats: Harness = {
      ...harness,
      tools: harness.tools.map((tool) =>
        tool.name === 'search_items'
          ? {
              ...tool,
              parameters: parseJsonKeepingFloats(
                JSON.stringify(tool.parameters).replace('"minimum":1,"maximum":10', '"minimum":1.0,"maximum":10.0'),
              ) as Harness['tools'][number]['parameters'],
            }
          : tool,
      ),
    };
    const search = floats.tools.find((tool) => tool.name === 'search_items')!;
    expect((search.parameters.properties as Record<string, Record<string, unknown>>).limit.minimum).toBeInstanceOf(
      PythonFloat,
    );
    expect(run('search_items', { query: '裤', limit: 3 }, floats).issueKind).toBeUndefined();
    const outside = run('search_items', { query: '裤', limit: 0 }, floats);
    expect(outside.issueKind).toBe('schema_violation');
    expect(outside.body.error.message).toContain('/limit must be >= 1');
  });

  it('checks canonical types even when a harness schema does not', () => {
    const loose: Harness = {
      ...harness,
      tools: harness.tools.map((tool) => ({ ...tool, parameters: { type: 'object' } })),
    };
    const result = executeToolCall(world, loose, {
      name: 'recommend_size',
      arguments: JSON.stringify({ item_id: apparel.itemId, height_cm: '170', weight_kg: 60 }),
    });
    expect(result.error).toEqual({
      code: 'INVALID_ARGUMENT',
      message: 'argument "height_cm" must be a number, got "170"',
    });
    expect(executeToolCall(world, loose, { name: 'get_item_detail', arguments: '{}' }).error?.code).toBe(
      'MISSING_ARGUMENT',
    );
  });
});

describe('bindings: a renamed harness runs in the same world with the same results', () => {
  const pairs: Array<[string, Record<string, unknown>, string, Record<string, unknown>]> = [];
  beforeAll(() => {
    pairs.push(
      ['get_item_detail', { item_id: apparel.itemId }, 'fetch_goods_profile', { goods: { id: apparel.itemId } }],
      [
        'search_items',
        { query: apparel.subcategory, category: 'apparel' },
        'find_products',
        { keywords: { text: apparel.subcategory, kind: '服饰' } },
      ],
      [
        'get_sku_stock',
        { item_id: apparel.itemId, size: 'L' },
        'inventory_lookup',
        { product_id: apparel.itemId, spec_size: 'L' },
      ],
      [
        'get_after_sales_policy',
        { topic: 'returns', item_id: gadget.itemId },
        'policy_lookup',
        { subject: 'refund', product_id: gadget.itemId },
      ],
      [
        'recommend_size',
        { item_id: apparel.itemId, height_cm: 175, weight_kg: 70 },
        'size_advisor',
        { product_id: apparel.itemId, body: { height: 175, weight: 70 } },
      ],
      [
        'compare_items',
        { item_ids: [apparel.itemId, gadget.itemId] },
        'side_by_side',
        { candidates: [apparel.itemId, gadget.itemId] },
      ],
      ['get_live_script', {}, 'show_rundown', {}],
      [
        'quote_final_price',
        { item_id: gadget.itemId, quantity: 3 },
        'checkout_preview',
        { product_id: gadget.itemId, count: 3 },
      ],
      ['get_promotions', { item_id: apparel.itemId }, 'coupon_center', { product_id: apparel.itemId }],
    );
  });

  it('gives byte-identical results and durations for every capability', () => {
    for (const [name, args, variantName, variantArgs] of pairs) {
      const original = run(name, args);
      const variant = run(variantName, variantArgs, renamed);
      expect(original.error).toBeUndefined();
      expect(variant.content).toBe(original.content);
      expect(variant.durationMs).toBe(original.durationMs);
    }
  });

  it('names the variant argument in errors and rejects the canonical spelling', () => {
    const canonicalName = run('inventory_lookup', { item_id: apparel.itemId }, renamed);
    expect(canonicalName.error?.code).toBe('SCHEMA_VIOLATION');
    const loose = { ...renamed, tools: renamed.tools.map((tool) => ({ ...tool, parameters: { type: 'object' } })) };
    const missing = executeToolCall(world, loose, {
      name: 'size_advisor',
      arguments: JSON.stringify({ product_id: apparel.itemId, body: { height: 170 } }),
    });
    expect(missing.error?.message).toBe('missing required argument "body.weight"');
  });

  it('translates canonical arguments to the tool shape and back', () => {
    const tool = renamed.tools.find((entry) => entry.name === 'policy_lookup')!;
    const shaped = toToolArguments(tool.binding, { topic: 'warranty', item_id: 'x' });
    expect(shaped).toEqual({ subject: 'repair', product_id: 'x' });
    expect(toCanonicalArguments(tool.binding, shaped)).toEqual({ topic: 'warranty', item_id: 'x' });
  });

  it('drops distractor arguments the binding ignores, so they change neither result nor latency', () => {
    const withDistractor: Harness = {
      ...renamed,
      tools: renamed.tools.map((tool) =>
        tool.name === 'checkout_preview'
          ? {
              ...tool,
              parameters: {
                ...tool.parameters,
                properties: { ...(tool.parameters.properties as object), trace_id: { type: 'string' } },
              },
              binding: { ...tool.binding, ignoredArguments: ['trace_id'] },
            }
          : tool,
      ),
    };
    const plain = run('checkout_preview', { product_id: gadget.itemId, count: 2 }, withDistractor);
    const traced = run(
      'checkout_preview',
      { product_id: gadget.itemId, count: 2, trace_id: 'abc-123' },
      withDistractor,
    );
    expect(traced.content).toBe(plain.content);
    expect(traced.durationMs).toBe(plain.durationMs);
    expect(traced.canonicalArguments).toEqual({ item_id: gadget.itemId, quantity: 2 });
  });

  it('is deterministic: the same call always takes the same simulated time', () => {
    const first = run('search_items', { query: '卫衣' });
    const second = run('search_items', { query: '卫衣' });
    expect(second).toEqual(first);
    expect(first.durationMs).toBeGreaterThan(0);
  });
});
