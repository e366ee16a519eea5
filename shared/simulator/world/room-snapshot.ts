import { z } from 'zod';

/**
 * The serializable live-room world: catalog items, shops, coupons, shipping and after-sales
 * rules, the shopping bag (links), the campaign timeline and the host persona. A task carries
 * one of these (only what matters to it), so a task from production logs is self-contained; the
 * generated catalog of any size is the same shape. Field names are camelCase (storage); the
 * tools answer the model in snake_case (wire).
 */

export const categories = ['apparel', 'beauty', 'food', 'electronics', 'home'] as const;
export const categorySchema = z.enum(categories);
export type Category = z.infer<typeof categorySchema>;

export const skuSchema = z.object({
  skuId: z.string().min(1),
  /** Apparel size (S, M, L, XL, XXL). */
  size: z.string().optional(),
  color: z.string().optional(),
  /** Capacity, weight, pack or configuration (`256GB`, `50ml`, `500g×2袋`). */
  spec: z.string().optional(),
  /** Current unit price in yuan (before coupons). */
  price: z.number().positive(),
  stock: z.number().int().nonnegative(),
});
export type Sku = z.infer<typeof skuSchema>;

export const sizeChartRowSchema = z.object({
  size: z.string().min(1),
  heightMinCm: z.number(),
  heightMaxCm: z.number(),
  weightMinKg: z.number(),
  weightMaxKg: z.number(),
  /** Chest circumference (胸围), cm. */
  chestCm: z.number().optional(),
  /** Garment length (衣长), cm. */
  lengthCm: z.number().optional(),
});
export type SizeChartRow = z.infer<typeof sizeChartRowSchema>;

export const itemSchema = z.object({
  itemId: z.string().min(1),
  title: z.string().min(1),
  /** What a host says aloud: brand + product noun, short. */
  shortName: z.string().min(1),
  brand: z.string().min(1),
  category: categorySchema,
  /** Product noun (羽绒服, 蓝牙耳机): what a viewer searches for. */
  subcategory: z.string().min(1),
  shopId: z.string().min(1),
  /** 划线价 (list price), yuan. */
  listPrice: z.number().positive(),
  /** Current price of the cheapest SKU before coupons ("¥X起"), yuan. */
  price: z.number().positive(),
  /** Spec sheet (材质, 续航, 净含量 ...): key -> value as shown on the item page. */
  specs: z.record(z.string(), z.string()),
  sellingPoints: z.array(z.string()),
  skus: z.array(skuSchema).min(1),
  sizeChart: z.array(sizeChartRowSchema).optional(),
  /** How the size chart runs: 'small' means pick one size up. */
  sizeFit: z.enum(['small', 'true', 'large']).optional(),
  shippingRuleId: z.string().min(1),
  policyId: z.string().min(1),
  monthlySales: z.number().int().nonnegative(),
});
export type Item = z.infer<typeof itemSchema>;

export const shopSchema = z.object({
  shopId: z.string().min(1),
  name: z.string().min(1),
});
export type Shop = z.infer<typeof shopSchema>;

export const couponSchema = z.object({
  couponId: z.string().min(1),
  /** Display name (直播间专享满300减50). */
  name: z.string().min(1),
  /** Stacking type: at most one coupon of each type per order; a platform and a shop coupon stack. */
  type: z.enum(['platform', 'shop']),
  /** Order subtotal (before coupons) needed, yuan; 0 = 无门槛. */
  threshold: z.number().nonnegative(),
  amount: z.number().positive(),
  /** Shop coupons: the issuing shop (all its items). */
  shopId: z.string().optional(),
  /** Restricts the coupon to these items (live-room coupons). */
  itemIds: z.array(z.string()).optional(),
  /** Restricts a platform coupon to categories. */
  categories: z.array(categorySchema).optional(),
  /** Only usable while this campaign is active. */
  campaignId: z.string().optional(),
});
export type Coupon = z.infer<typeof couponSchema>;

export const shippingRuleSchema = z.object({
  ruleId: z.string().min(1),
  /** Order amount from which shipping is free; 0 = always free (全场包邮). */
  freeShippingThreshold: z.number().nonnegative(),
  /** Fee below the threshold, yuan. */
  baseFee: z.number().nonnegative(),
  /** Ships within this many hours after payment. */
  dispatchHours: z.number().int().positive(),
  carrier: z.string().min(1),
  /** Regions (provinces) that are never free to ship to. */
  remoteRegions: z.array(z.string()),
  /** Extra fee for remote regions, yuan; null = not shipped there at all. */
  remoteSurcharge: z.number().nonnegative().nullable(),
});
export type ShippingRule = z.infer<typeof shippingRuleSchema>;

export const afterSalesPolicySchema = z.object({
  policyId: z.string().min(1),
  /** 无理由退货 days; 0 = not supported. */
  returnDays: z.number().int().nonnegative(),
  returnNote: z.string(),
  /** 运费险 included. */
  returnShippingInsurance: z.boolean(),
  /** Warranty months; 0 = none (quality problems still handled by 质量问题包退换). */
  warrantyMonths: z.number().int().nonnegative(),
  warrantyNote: z.string(),
  /** Invoice kinds available (电子普通发票, 增值税专用发票). */
  invoiceTypes: z.array(z.string()).min(1),
  /** 保价 days; 0 = none. */
  priceProtectionDays: z.number().int().nonnegative(),
});
export type AfterSalesPolicy = z.infer<typeof afterSalesPolicySchema>;

export const campaignSchema = z.object({
  campaignId: z.string().min(1),
  name: z.string().min(1),
  /** ISO timestamps; active while startsAt <= now < endsAt. */
  startsAt: z.string().min(1),
  endsAt: z.string().min(1),
  /** The live-room coupon hooks ask the host to mention. */
  couponId: z.string().optional(),
  talkingPoints: z.array(z.string()),
  /** Gift for early buyers (前100名送...), when any. */
  gift: z.string().optional(),
});
export type Campaign = z.infer<typeof campaignSchema>;

export const linkSchema = z.object({
  /** Number shown in the shopping bag (N号链接). */
  linkNo: z.number().int().positive(),
  itemId: z.string().min(1),
});
export type Link = z.infer<typeof linkSchema>;

export const roomSnapshotSchema = z.object({
  roomId: z.string().min(1),
  host: z.object({ name: z.string().min(1), style: z.string() }),
  /** ISO timestamp of the scene (decides which campaign is active). */
  now: z.string().min(1),
  featuredItemId: z.string().optional(),
  links: z.array(linkSchema),
  campaigns: z.array(campaignSchema),
  items: z.array(itemSchema),
  shops: z.array(shopSchema),
  coupons: z.array(couponSchema),
  shippingRules: z.array(shippingRuleSchema),
  policies: z.array(afterSalesPolicySchema),
});
export type RoomSnapshot = z.infer<typeof roomSnapshotSchema>;
