import type { Coupon, Item, Sku } from './room-snapshot';
import { couponAppliesTo, roundCents, type World } from './world';

/** The stacking rule every quote follows, stated to the model in tool results. */
export const stackingRule =
  '平台券和店铺券可叠加，同类型券每单限用1张；满减门槛按用券前的商品总价计算；系统自动选择最优组合';

export interface PriceQuote {
  item: Item;
  sku?: Sku;
  quantity: number;
  unitPrice: number;
  subtotal: number;
  /** The coupons used (at most one platform and one shop coupon). */
  couponsApplied: Coupon[];
  discountTotal: number;
  /** 到手价 for the whole order, before shipping. */
  finalPrice: number;
  finalUnitPrice: number;
  shippingFee: number;
}

/**
 * The final price of an order: unit price (the SKU's, else the item's lowest) times quantity,
 * minus the best usable shop coupon and the best usable platform coupon whose thresholds the
 * pre-coupon subtotal meets. Ties go to the coupon with the lower threshold, then the smaller id,
 * so the answer is unique.
 */
export function quotePrice(world: World, item: Item, quantity: number, sku?: Sku): PriceQuote {
  const unitPrice = sku?.price ?? item.price;
  const subtotal = roundCents(unitPrice * quantity);
  const couponsApplied: Coupon[] = [];
  for (const type of ['platform', 'shop'] as const) {
    let best: Coupon | undefined;
    for (const coupon of world.snapshot.coupons) {
      if (coupon.type !== type || subtotal < coupon.threshold || !couponAppliesTo(world, coupon, item)) continue;
      if (best === undefined || isBetter(coupon, best)) best = coupon;
    }
    if (best !== undefined) couponsApplied.push(best);
  }
  const discount = couponsApplied.reduce((sum, coupon) => sum + coupon.amount, 0);
  // A coupon never makes an order free: platforms keep a one-cent floor.
  const finalPrice = Math.max(0.01, roundCents(subtotal - discount));
  const rule = world.shippingRulesById.get(item.shippingRuleId);
  const shippingFee = rule === undefined || finalPrice >= rule.freeShippingThreshold ? 0 : rule.baseFee;
  return {
    item,
    sku,
    quantity,
    unitPrice,
    subtotal,
    couponsApplied,
    discountTotal: roundCents(subtotal - finalPrice),
    finalPrice,
    finalUnitPrice: roundCents(finalPrice / quantity),
    shippingFee,
  };
}

function isBetter(candidate: Coupon, current: Coupon): boolean {
  if (candidate.amount !== current.amount) return candidate.amount > current.amount;
  if (candidate.threshold !== current.threshold) return candidate.threshold < current.threshold;
  return candidate.couponId < current.couponId;
}
