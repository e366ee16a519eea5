import type { AfterSalesPolicy, Campaign, Coupon, Item, RoomSnapshot, ShippingRule, Shop } from './room-snapshot';

/**
 * A room snapshot with the lookups the tools need. Built once per snapshot (a task's room or a
 * generated catalog of up to 100,000 items) and read-only afterwards, so episodes can share it.
 */
export interface World {
  readonly snapshot: RoomSnapshot;
  readonly itemsById: ReadonlyMap<string, Item>;
  readonly shopsById: ReadonlyMap<string, Shop>;
  readonly couponsById: ReadonlyMap<string, Coupon>;
  readonly shippingRulesById: ReadonlyMap<string, ShippingRule>;
  readonly policiesById: ReadonlyMap<string, AfterSalesPolicy>;
  /** linkNo -> itemId (the shopping bag). */
  readonly itemIdByLink: ReadonlyMap<number, string>;
  /** itemId -> linkNo. */
  readonly linkByItemId: ReadonlyMap<string, number>;
  /** The campaign active at `snapshot.now`, if any. */
  readonly activeCampaign: Campaign | undefined;
  /** The active campaign's live-room coupon, if any. */
  readonly activeCoupon: Coupon | undefined;
}

export function createWorld(snapshot: RoomSnapshot): World {
  const byId = <T, K extends keyof T>(values: readonly T[], key: K) =>
    new Map(values.map((value) => [value[key] as unknown as string, value]));
  const nowMs = Date.parse(snapshot.now);
  const activeCampaign = snapshot.campaigns.find(
    (campaign) => Date.parse(campaign.startsAt) <= nowMs && nowMs < Date.parse(campaign.endsAt),
  );
  const couponsById = byId(snapshot.coupons, 'couponId');
  return {
    snapshot,
    itemsById: byId(snapshot.items, 'itemId'),
    shopsById: byId(snapshot.shops, 'shopId'),
    couponsById,
    shippingRulesById: byId(snapshot.shippingRules, 'ruleId'),
    policiesById: byId(snapshot.policies, 'policyId'),
    itemIdByLink: new Map(snapshot.links.map((link) => [link.linkNo, link.itemId])),
    linkByItemId: new Map(snapshot.links.map((link) => [link.itemId, link.linkNo])),
    activeCampaign,
    activeCoupon: activeCampaign?.couponId !== undefined ? couponsById.get(activeCampaign.couponId) : undefined,
  };
}

/** Whether a coupon can be used now on this item (campaign window, shop, item and category scope). */
export function couponAppliesTo(world: World, coupon: Coupon, item: Item): boolean {
  if (coupon.campaignId !== undefined && world.activeCampaign?.campaignId !== coupon.campaignId) return false;
  if (coupon.shopId !== undefined && coupon.shopId !== item.shopId) return false;
  if (coupon.itemIds !== undefined && !coupon.itemIds.includes(item.itemId)) return false;
  if (coupon.categories !== undefined && !coupon.categories.includes(item.category)) return false;
  return true;
}

/** How a coupon reads aloud: 满300减50 / 无门槛5元. */
export function couponLabel(coupon: Coupon): string {
  return coupon.threshold > 0
    ? `满${formatYuan(coupon.threshold)}减${formatYuan(coupon.amount)}`
    : `无门槛${formatYuan(coupon.amount)}元`;
}

/** Yuan without trailing zeros: 299, 29.9, 0.5. */
export function formatYuan(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** Rounds to cents (prices are in yuan with two decimals at most). */
export function roundCents(value: number): number {
  return Math.round(value * 100) / 100;
}
