import { hashValue } from '../../hash/hash';
import { generateRoomSnapshot, generateWorld } from './generate-world';
import { quotePrice } from './price-quote';
import { categories, roomSnapshotSchema, type Coupon, type RoomSnapshot } from './room-snapshot';
import { createWorld } from './world';

describe('generateWorld', () => {
  it('gives the same catalog for the same seed and a different one for another seed', () => {
    const first = generateRoomSnapshot({ seed: 'w1', itemCount: 300 });
    expect(hashValue(generateRoomSnapshot({ seed: 'w1', itemCount: 300 }))).toBe(hashValue(first));
    expect(hashValue(generateRoomSnapshot({ seed: 'w2', itemCount: 300 }))).not.toBe(hashValue(first));
  });

  it('extends a smaller catalog of the same seed: the first items are identical', () => {
    const small = generateRoomSnapshot({ seed: 'prefix', itemCount: 50 });
    const large = generateRoomSnapshot({ seed: 'prefix', itemCount: 500 });
    expect(large.items.slice(0, 50)).toEqual(small.items);
  });

  it('produces a valid, internally consistent room snapshot with all five categories', () => {
    const snapshot = generateRoomSnapshot({ seed: 'valid', itemCount: 400 });
    expect(roomSnapshotSchema.safeParse(snapshot).success).toBe(true);
    const world = createWorld(snapshot);
    expect(new Set(snapshot.items.map((item) => item.category))).toEqual(new Set(categories));
    for (const item of snapshot.items) {
      expect(item.price).toBe(Math.min(...item.skus.map((sku) => sku.price)));
      expect(item.listPrice).toBeGreaterThan(item.price);
      expect(world.shippingRulesById.has(item.shippingRuleId)).toBe(true);
      expect(world.policiesById.has(item.policyId)).toBe(true);
      expect(world.shopsById.has(item.shopId)).toBe(true);
      expect(item.sizeChart !== undefined).toBe(item.category === 'apparel');
      expect(new Set(item.skus.map((sku) => sku.skuId)).size).toBe(item.skus.length);
    }
    expect(snapshot.items.some((item) => item.skus.some((sku) => sku.stock === 0))).toBe(true);
    // Fresh food is never returnable without reason and ships cold.
    for (const item of snapshot.items.filter((entry) => ['车厘子', '大闸蟹'].includes(entry.subcategory))) {
      expect(world.policiesById.get(item.policyId)!.returnDays).toBe(0);
      expect(world.shippingRulesById.get(item.shippingRuleId)!.carrier).toBe('顺丰冷链');
    }
    expect(world.activeCampaign?.campaignId).toBe('campaign-2');
    expect(world.activeCoupon?.name).toMatch(/^直播间专享/);
  });

  it('scales from 10 to 100,000 items', () => {
    expect(generateWorld({ seed: 'tiny', itemCount: 10 }).snapshot.items).toHaveLength(10);
    const huge = generateWorld({ seed: 'huge', itemCount: 100_000 });
    expect(huge.itemsById.size).toBe(100_000);
    expect(() => generateWorld({ seed: 'x', itemCount: 100_001 })).toThrow(RangeError);
  });
});

describe('quotePrice', () => {
  function roomWith(coupons: Coupon[], price: number): RoomSnapshot {
    const base = generateRoomSnapshot({ seed: 'quote', itemCount: 3 });
    const item = { ...base.items[0], shopId: 'shop-x', price, skus: [{ ...base.items[0].skus[0], price }] };
    return { ...base, items: [item], coupons };
  }
  const platform300: Coupon = { couponId: 'p1', name: '平台满300减50', type: 'platform', threshold: 300, amount: 50 };
  const platformFree: Coupon = { couponId: 'p2', name: '平台无门槛5元', type: 'platform', threshold: 0, amount: 5 };
  const shop199: Coupon = {
    couponId: 's1',
    name: '店铺满199减30',
    type: 'shop',
    threshold: 199,
    amount: 30,
    shopId: 'shop-x',
  };
  const otherShop: Coupon = {
    couponId: 's2',
    name: '别家满100减90',
    type: 'shop',
    threshold: 100,
    amount: 90,
    shopId: 'shop-y',
  };

  it('stacks the best platform coupon with the best shop coupon whose thresholds the subtotal meets', () => {
    const world = createWorld(roomWith([platform300, platformFree, shop199, otherShop], 169));
    const item = world.snapshot.items[0];
    const one = quotePrice(world, item, 1);
    expect(one.couponsApplied.map((coupon) => coupon.couponId)).toEqual(['p2']);
    expect(one.finalPrice).toBe(164);
    const two = quotePrice(world, item, 2);
    expect(two.subtotal).toBe(338);
    expect(two.couponsApplied.map((coupon) => coupon.couponId)).toEqual(['p1', 's1']);
    expect(two.finalPrice).toBe(258);
    expect(two.finalUnitPrice).toBe(129);
  });

  it('never lets coupons take an order below one cent', () => {
    const world = createWorld(
      roomWith(
        [{ couponId: 'big', name: '无门槛大额', type: 'shop', threshold: 0, amount: 500, shopId: 'shop-x' }],
        99,
      ),
    );
    expect(quotePrice(world, world.snapshot.items[0], 1).finalPrice).toBe(0.01);
  });
});
