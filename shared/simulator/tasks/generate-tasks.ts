import { shortHash } from '../../hash/hash';
import { Rng } from '../../random/rng';
import { searchItems } from '../tools/capabilities';
import { ordinaryRegions, outOfCatalogProducts, unrecordedAttributes } from '../world/catalog-vocabulary';
import { generateWorld } from '../world/generate-world';
import type { Item, RoomSnapshot } from '../world/room-snapshot';
import type { TextStyle } from '../world/text-style';
import { createWorld, type World } from '../world/world';
import { expectationsForIntent } from './expectations';
import {
  TASK_SCHEMA_VERSION,
  chitChatTopics,
  taskCategories,
  type Intent,
  type ItemRef,
  type PolicyAspect,
  type SimpleIntent,
  type Task,
  type TaskCategory,
  type TaskTurn,
} from './task-schema';
import { chattyMessage } from './viewer-chatter';
import { phraseIntent, trapTerms } from './viewer-phrasing';

export interface GenerateTasksOptions {
  count: number;
  /** Index of the first task: tasks [start, start + count) of the seed's sequence. Default 0. */
  start?: number;
  seed: string | number;
  /** The catalog rooms are drawn from. Default 2,000 items. */
  world?: { itemCount?: number };
  /** Relative weights per category; missing categories keep their default, 0 leaves one out. */
  categoryWeights?: Partial<Record<TaskCategory, number>>;
  /** How viewers refer to the items they ask about. Default: on screen half the time, else by link number 60%. */
  references?: ReferenceShares;
  /**
   * `cjk-heavy`: production-like text in the rooms (see generateWorld's `text`) and viewer
   * messages of several clauses; the same categories, rooms and intents as `default` for the same
   * seed. Recorded in each task's source. Default `default`.
   */
  text?: TextStyle;
}

/**
 * How a viewer refers to an item: `onScreen` is the chance that the item asked about is the one on
 * screen ("这个", whose id the room context shows), `byLink` the chance that any other item is named
 * by its link number rather than by brand and kind (both need a lookup tool first).
 */
export interface ReferenceShares {
  onScreen?: number;
  byLink?: number;
}

const defaultReferences: Required<ReferenceShares> = { onScreen: 0.5, byLink: 0.6 };

/** Default mix: product questions dominate, as in a real live room's comments. */
export const defaultCategoryWeights: Record<TaskCategory, number> = {
  price: 1.2,
  spec: 1,
  stock_size: 1,
  coupon_math: 1,
  shipping_after_sales: 1.2,
  comparison: 0.7,
  chit_chat: 0.6,
  compliance_trap: 0.8,
  multi_question: 0.8,
  multi_turn: 0.8,
  out_of_catalog: 0.6,
  // Off by default (the default mix draws as before); the HAT-effect experiment's multi-turn policy desk.
  after_sales_multi_turn: 0,
};

/** The categories the default mix draws (weight above 0); eval's generated suites cycle through these by default. */
export const defaultMixCategories: readonly TaskCategory[] = taskCategories.filter(
  (category) => defaultCategoryWeights[category] > 0,
);

/**
 * Generates `count` self-contained tasks: each draws a small room (4-7 bag links, a featured
 * item or none, a campaign running or not) from a seeded catalog, an intent of its category,
 * the viewer's message and the expectations computed from the room. Task i depends only on
 * (seed, i, world options, weights, references, text).
 */
export function generateTasks(options: GenerateTasksOptions): Task[] {
  const text = options.text ?? 'default';
  const catalog = generateWorld({
    seed: `${options.seed}/catalog`,
    itemCount: options.world?.itemCount ?? 2000,
    text,
  });
  const weights = taskCategories.map(
    (category) => options.categoryWeights?.[category] ?? defaultCategoryWeights[category],
  );
  const tasks: Task[] = [];
  const start = options.start ?? 0;
  for (let index = start; index < start + options.count; index++) {
    const rng = new Rng(`tasks/${options.seed}/${index}`);
    const category = rng.fork('category').weighted(taskCategories, weights);
    const source = {
      kind: 'generated' as const,
      seed: String(options.seed),
      index,
      ...(text !== 'default' ? { text } : {}),
    };
    tasks.push(generateTask(catalog, category, rng, source, options.references, text));
  }
  return tasks;
}

/**
 * Builds one task of a category from a catalog (exported for tests and log-import fallbacks).
 * `text` is the catalog's text style: `cjk-heavy` also makes the viewer's messages chatty.
 */
export function generateTask(
  catalog: World,
  category: TaskCategory,
  rng: Rng,
  source: Task['source'],
  references: ReferenceShares = {},
  text: TextStyle = 'default',
): Task {
  const shares = { ...defaultReferences, ...references };
  const plan = planners[category](catalog, rng, shares);
  const room = buildRoom(
    catalog,
    rng.fork('room'),
    plan.targets,
    plan.featuredTarget,
    rng.fork('campaign').chance(0.6),
  );
  const world = createWorld(room);
  const refs = new RefChooser(world, rng.fork('refs'), plan.featuredTarget, shares.byLink);
  const intents = plan.intents(refs, world);
  const phrasing = rng.fork('phrasing');
  // A stream of its own, so the question each message asks is worded as in the default text.
  const chatter = text === 'cjk-heavy' ? rng.fork('chatter') : undefined;
  const turns: TaskTurn[] = intents.map((intent) => {
    const question = phraseIntent(intent, world, phrasing);
    return {
      message: chatter !== undefined ? chattyMessage(question, intent, chatter) : question,
      intent,
      expect: expectationsForIntent(world, intent),
    };
  });
  return {
    schemaVersion: TASK_SCHEMA_VERSION,
    id: `${category}-${shortHash({ room, turns })}`,
    category,
    source,
    room,
    turns,
  };
}

interface TaskPlan {
  /** Items the intents are about (they go in the bag). */
  targets: Item[];
  /** The target that is on screen (referred to as 这个), if any. */
  featuredTarget?: Item;
  intents: (refs: RefChooser, world: World) => Intent[];
}

/** Chooses how the viewer refers to each target: on screen, by link number or by name. */
class RefChooser {
  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    private readonly featured: Item | undefined,
    private readonly byLink: number,
  ) {}

  refFor(item: Item): ItemRef {
    if (this.featured?.itemId === item.itemId) return { kind: 'featured' };
    if (this.rng.chance(this.byLink)) return { kind: 'link', linkNo: this.world.linkByItemId.get(item.itemId)! };
    const text = `${item.brand}${item.subcategory}`;
    const top = (searchItems(this.world, text).items as Array<{ item_id: string }>)[0];
    if (top?.item_id !== item.itemId)
      throw new Error(`name "${text}" does not find item ${item.itemId} first; room short names must be unique`);
    return { kind: 'name', text };
  }
}

function pickItem(catalog: World, rng: Rng, predicate: (item: Item) => boolean = () => true): Item {
  const items = catalog.snapshot.items;
  for (let attempt = 0; attempt < 200; attempt++) {
    const item = rng.pick(items);
    if (predicate(item)) return item;
  }
  const start = rng.int(0, items.length - 1);
  for (let offset = 0; offset < items.length; offset++) {
    const item = items[(start + offset) % items.length];
    if (predicate(item)) return item;
  }
  throw new RangeError('the catalog has no item this task category needs; generate a larger catalog');
}

const maybeFeatured = (rng: Rng, item: Item, shares: Required<ReferenceShares>): Item | undefined =>
  rng.chance(shares.onScreen) ? item : undefined;
const hasWarranty = (item: Item): boolean =>
  item.category === 'electronics' || item.subcategory === '空气炸锅' || item.subcategory === '保温杯';

function policyIntent(catalog: World, rng: Rng, aspect: PolicyAspect, item: Item, ref: ItemRef): SimpleIntent {
  if (aspect !== 'remote') return { kind: 'policy', itemId: item.itemId, ref, aspect };
  const rule = catalog.shippingRulesById.get(item.shippingRuleId)!;
  const region = rng.chance(0.65) ? rng.pick(rule.remoteRegions) : rng.pick(ordinaryRegions);
  return { kind: 'policy', itemId: item.itemId, ref, aspect, region };
}

function sizeIntent(rng: Rng, item: Item, ref: ItemRef, checkStock: boolean): SimpleIntent {
  const row = rng.pick(item.sizeChart!);
  return {
    kind: 'size',
    itemId: item.itemId,
    ref,
    heightCm: rng.int(row.heightMinCm, row.heightMaxCm - 1),
    weightKg: rng.int(row.weightMinKg, row.weightMaxKg - 1),
    weightUnit: rng.chance(0.4) ? 'jin' : 'kg',
    checkStock,
  };
}

function stockIntent(rng: Rng, item: Item, ref: ItemRef): SimpleIntent {
  // Ask about a sold-out SKU a third of the time when there is one: that is where hosts slip.
  const soldOut = item.skus.filter((sku) => sku.stock === 0);
  const sku = soldOut.length > 0 && rng.chance(0.35) ? rng.pick(soldOut) : rng.pick(item.skus);
  const intent: SimpleIntent = { kind: 'stock', itemId: item.itemId, ref };
  if (sku.size !== undefined) {
    intent.size = sku.size;
    if (sku.color !== undefined && rng.chance(0.5)) intent.color = sku.color;
  } else if (sku.color !== undefined) {
    intent.color = sku.color;
  } else if (sku.spec !== undefined) {
    intent.spec = sku.spec;
  }
  return intent;
}

function finalPriceIntent(rng: Rng, item: Item, ref: ItemRef, quantity?: number): SimpleIntent {
  const specs = [...new Set(item.skus.map((sku) => sku.spec).filter((spec): spec is string => spec !== undefined))];
  const intent: SimpleIntent = {
    kind: 'final_price',
    itemId: item.itemId,
    ref,
    quantity: quantity ?? rng.weighted([1, 2, 3], [0.3, 0.45, 0.25]),
  };
  if (specs.length > 1 && rng.chance(0.4)) intent.spec = rng.pick(specs.slice(1));
  return intent;
}

function specIntent(rng: Rng, item: Item, ref: ItemRef): SimpleIntent {
  return {
    kind: 'spec',
    itemId: item.itemId,
    ref,
    specKey: rng.pick(Object.keys(item.specs).filter((key) => key !== '可选规格')),
  };
}

const planners: Record<TaskCategory, (catalog: World, rng: Rng, shares: Required<ReferenceShares>) => TaskPlan> = {
  price: (catalog, rng, shares) => {
    const item = pickItem(catalog, rng);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [{ kind: 'price', itemId: item.itemId, ref: refs.refFor(item) }],
    };
  },
  spec: (catalog, rng, shares) => {
    const item = pickItem(catalog, rng);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [specIntent(rng, item, refs.refFor(item))],
    };
  },
  stock_size: (catalog, rng, shares) => {
    if (rng.chance(0.5)) {
      const item = pickItem(catalog, rng, (candidate) => candidate.sizeChart !== undefined);
      const checkStock = rng.chance(0.5);
      return {
        targets: [item],
        featuredTarget: maybeFeatured(rng, item, shares),
        intents: (refs) => [sizeIntent(rng, item, refs.refFor(item), checkStock)],
      };
    }
    const item = pickItem(catalog, rng, (candidate) => candidate.skus.length > 1);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [stockIntent(rng, item, refs.refFor(item))],
    };
  },
  coupon_math: (catalog, rng, shares) => {
    const item = pickItem(catalog, rng);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [finalPriceIntent(rng, item, refs.refFor(item))],
    };
  },
  shipping_after_sales: (catalog, rng, shares) => {
    const aspects: PolicyAspect[] = [
      'free_shipping',
      'remote',
      'dispatch',
      'returns',
      'warranty',
      'invoice',
      'special_invoice',
    ];
    const aspect = rng.weighted(aspects, [1, 1, 1, 1.2, 0.8, 0.6, 0.4]);
    const predicate =
      aspect === 'warranty'
        ? hasWarranty
        : aspect === 'special_invoice'
          ? (item: Item) => item.category === 'electronics'
          : () => true;
    const item = pickItem(catalog, rng, predicate);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [policyIntent(catalog, rng, aspect, item, refs.refFor(item))],
    };
  },
  comparison: (catalog, rng, shares) => {
    const first = pickItem(catalog, rng);
    const second = pickItem(
      catalog,
      rng,
      (item) => item.subcategory === first.subcategory && item.brand !== first.brand && item.price !== first.price,
    );
    return {
      targets: [first, second],
      featuredTarget: maybeFeatured(rng, first, shares),
      intents: (refs) => [
        { kind: 'compare', items: [first, second].map((item) => ({ itemId: item.itemId, ref: refs.refFor(item) })) },
      ],
    };
  },
  chit_chat: (_catalog, rng) => ({
    targets: [],
    intents: () => [{ kind: 'chit_chat', topic: rng.pick(chitChatTopics) }],
  }),
  compliance_trap: (catalog, rng, shares) => {
    const trap = rng.weighted(['cheapest', 'lifetime', 'best'] as const, [0.45, 0.25, 0.3]);
    const item = pickItem(catalog, rng, trap === 'lifetime' ? hasWarranty : () => true);
    const term = rng.pick(trapTerms(trap));
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [{ kind: 'trap', itemId: item.itemId, ref: refs.refFor(item), trap, term }],
    };
  },
  multi_question: (catalog, rng, shares) => {
    const combos: Array<[(item: Item) => boolean, (item: Item, ref: ItemRef) => SimpleIntent[]]> = [
      [
        () => true,
        (item, ref) => [
          { kind: 'price', itemId: item.itemId, ref },
          policyIntent(catalog, rng, 'free_shipping', item, ref),
        ],
      ],
      [(item) => item.skus.length > 1, (item, ref) => [specIntent(rng, item, ref), stockIntent(rng, item, ref)]],
      [
        () => true,
        (item, ref) => [{ kind: 'price', itemId: item.itemId, ref }, policyIntent(catalog, rng, 'returns', item, ref)],
      ],
      [
        () => true,
        (item, ref) => [finalPriceIntent(rng, item, ref, 2), policyIntent(catalog, rng, 'dispatch', item, ref)],
      ],
      [
        (item) => item.sizeChart !== undefined,
        (item, ref) => [sizeIntent(rng, item, ref, false), policyIntent(catalog, rng, 'returns', item, ref)],
      ],
      [hasWarranty, (item, ref) => [specIntent(rng, item, ref), policyIntent(catalog, rng, 'warranty', item, ref)]],
    ];
    const [predicate, build] = rng.pick(combos);
    const item = pickItem(catalog, rng, predicate);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [{ kind: 'multi', parts: build(item, refs.refFor(item)) }],
    };
  },
  multi_turn: (catalog, rng, shares) => {
    const item = pickItem(catalog, rng);
    const followUps = rng.int(1, 2);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => {
        const ref = refs.refFor(item);
        const first: SimpleIntent =
          item.sizeChart !== undefined && rng.chance(0.4)
            ? sizeIntent(rng, item, ref, false)
            : rng.chance(0.5)
              ? { kind: 'price', itemId: item.itemId, ref }
              : specIntent(rng, item, ref);
        const previous: ItemRef = { kind: 'previous' };
        const options: Array<() => SimpleIntent> = [
          () => finalPriceIntent(rng, item, previous, rng.int(2, 3)),
          () => stockIntent(rng, item, previous),
          () => policyIntent(catalog, rng, rng.pick(['returns', 'free_shipping', 'dispatch'] as const), item, previous),
          ...(hasWarranty(item) ? [() => policyIntent(catalog, rng, 'warranty', item, previous)] : []),
        ];
        return [first, ...rng.sample(options, followUps).map((option) => option())];
      },
    };
  },
  // Two or three after-sales questions about one item, one per viewer turn: the first names the
  // item, the follow-ups mean the one just discussed.
  after_sales_multi_turn: (catalog, rng, shares) => {
    const item = pickItem(catalog, rng);
    const aspects: PolicyAspect[] = ['free_shipping', 'remote', 'dispatch', 'returns', 'invoice'];
    if (hasWarranty(item)) aspects.push('warranty');
    const asked = rng.sample(aspects, rng.int(2, 3));
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) =>
        asked.map((aspect, turn) =>
          policyIntent(catalog, rng, aspect, item, turn === 0 ? refs.refFor(item) : { kind: 'previous' }),
        ),
    };
  },
  out_of_catalog: (catalog, rng, shares) => {
    if (rng.chance(0.6)) {
      return {
        targets: [],
        intents: (_refs, world) => {
          const candidates = outOfCatalogProducts.filter(
            (product) => (searchItems(world, product.query).total as number) === 0,
          );
          return [{ kind: 'unknown_item', query: rng.pick(candidates).query }];
        },
      };
    }
    const item = pickItem(catalog, rng);
    return {
      targets: [item],
      featuredTarget: maybeFeatured(rng, item, shares),
      intents: (refs) => [
        {
          kind: 'unknown_spec',
          itemId: item.itemId,
          ref: refs.refFor(item),
          attribute: rng.pick(unrecordedAttributes[item.category]),
        },
      ],
    };
  },
};

/**
 * A room around the targets: a bag of 4-7 items with distinct short names (so a name finds one
 * item), the featured item (the featured target, else another bag item or none), the catalog's
 * campaign timeline with the scene time inside or after the running campaign, and only the
 * shops, coupons, shipping rules and policies those items use.
 */
function buildRoom(
  catalog: World,
  rng: Rng,
  targets: Item[],
  featuredTarget: Item | undefined,
  campaignActive: boolean,
): RoomSnapshot {
  const bag = [...targets];
  const names = new Set(bag.map((item) => item.shortName));
  const size = Math.max(bag.length + 1, rng.int(4, 7));
  for (let attempt = 0; bag.length < size && attempt < 100; attempt++) {
    const item = rng.pick(catalog.snapshot.items);
    if (!names.has(item.shortName)) {
      bag.push(item);
      names.add(item.shortName);
    }
  }
  const ordered = rng.shuffle(bag);
  const ids = new Set(ordered.map((item) => item.itemId));
  const others = ordered.filter((item) => !targets.includes(item));
  const featured = featuredTarget ?? (rng.chance(0.85) ? others[0] : undefined);
  const shopIds = new Set(ordered.map((item) => item.shopId));
  const { snapshot } = catalog;
  const running = catalog.activeCampaign;
  const now =
    campaignActive || running === undefined
      ? snapshot.now
      : new Date(Date.parse(running.endsAt) + 30 * 60_000).toISOString();
  return {
    roomId: `room-${rng.int(100000, 999999)}`,
    host: snapshot.host,
    now,
    ...(featured !== undefined ? { featuredItemId: featured.itemId } : {}),
    links: ordered.map((item, index) => ({ linkNo: index + 1, itemId: item.itemId })),
    campaigns: snapshot.campaigns,
    items: ordered,
    shops: snapshot.shops.filter((shop) => shopIds.has(shop.shopId)),
    coupons: snapshot.coupons
      // Live-room coupons cover this room's bag; other item-scoped coupons only the bag items they name.
      .filter(
        (coupon) =>
          (coupon.shopId === undefined || shopIds.has(coupon.shopId)) &&
          (coupon.itemIds === undefined || coupon.campaignId !== undefined || coupon.itemIds.some((id) => ids.has(id))),
      )
      .map((coupon) =>
        coupon.itemIds === undefined
          ? coupon
          : {
              ...coupon,
              itemIds:
                coupon.campaignId !== undefined
                  ? ordered.map((item) => item.itemId)
                  : coupon.itemIds.filter((id) => ids.has(id)),
            },
      ),
    shippingRules: snapshot.shippingRules.filter((rule) => ordered.some((item) => item.shippingRuleId === rule.ruleId)),
    policies: snapshot.policies.filter((policy) => ordered.some((item) => item.policyId === policy.policyId)),
  };
}
