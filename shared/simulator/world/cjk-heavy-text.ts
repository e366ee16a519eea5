import type { Rng } from '../../random/rng';
import type { PolicyProfile, SubcategoryTemplate } from './catalog-vocabulary';
import {
  campaignGiftLines,
  campaignScripts,
  categorySpecDetails,
  categoryTitleWords,
  extraSellingPoints,
  hostStyleLines,
  launchWords,
  policyNoteClauses,
  sellingClauses,
  specDetails,
  titleTags,
  titleWords,
} from './cjk-heavy-vocabulary';
import type { AfterSalesPolicy, Campaign, Item } from './room-snapshot';

/**
 * The text of a `cjk-heavy` world: an item, policy or campaign of the default world rewritten
 * the way production rooms write them, every fact kept. What answers quote keeps its default
 * form at the front (a spec value's main part before its parenthesis, a selling point's first
 * clause, a gift's first clause), so expectations computed from the room still hold and the
 * scripted expert's replies still fit the sample harness's 60-character limit.
 */

/** Taobao caps titles at 60 characters. */
export const titleLimit = 60;
/**
 * Longest spec value: the expert's shortest spec answer (key, 是, value) must leave room for a
 * tone marker, a second answer and the coupon inside a 60-character reply.
 */
export const specValueLimit = 28;

const length = (text: string): number => [...text].length;

/** A keyword-stuffed title: tag, brand, launch word, the default title's words, then product and category words. */
function longTitle(item: Item, template: SubcategoryTemplate, rng: Rng): string {
  const words = item.title.slice(item.brand.length + 1);
  let title = `${rng.chance(0.6) ? rng.pick(titleTags) : ''}${item.brand}${rng.pick(launchWords)}${words}`;
  const target = rng.int(32, 58);
  for (const word of rng.shuffle([...(titleWords[template.name] ?? []), ...categoryTitleWords[item.category]])) {
    if (length(title) >= target) break;
    if (length(title) + length(word) <= titleLimit) title += word;
  }
  return title;
}

/** Each value of two characters or more gets a parenthesis, within `specValueLimit`. */
function longSpecs(item: Item, rng: Rng): Record<string, string> {
  const specs: Record<string, string> = {};
  for (const [key, value] of Object.entries(item.specs)) {
    const room = specValueLimit - length(value) - 2;
    const details =
      key === '可选规格' || length(value) < 2
        ? []
        : (specDetails[key] ?? categorySpecDetails[item.category]).filter((detail) => length(detail) <= room);
    specs[key] = details.length > 0 ? `${value}（${rng.pick(details)}）` : value;
  }
  return specs;
}

/** The default points with a clause or two more each, then one or two points of several clauses. */
function longSellingPoints(item: Item, rng: Rng): string[] {
  const clauses = sellingClauses[item.category];
  return [
    ...item.sellingPoints.map((point) => [point, ...rng.sample(clauses, rng.int(1, 2))].join('，')),
    ...rng.sample(extraSellingPoints[item.category], rng.int(1, 2)),
  ];
}

export function cjkHeavyItem(item: Item, template: SubcategoryTemplate, rng: Rng): Item {
  return {
    ...item,
    title: longTitle(item, template, rng),
    specs: longSpecs(item, rng),
    sellingPoints: longSellingPoints(item, rng),
  };
}

export function cjkHeavyPolicy(policy: AfterSalesPolicy, profile: PolicyProfile, rng: Rng): AfterSalesPolicy {
  const clauses = policyNoteClauses[profile];
  return {
    ...policy,
    returnNote: [policy.returnNote, ...rng.sample(clauses.returns, 2)].join('，'),
    warrantyNote: [policy.warrantyNote, ...rng.sample(clauses.warranty, rng.int(1, 2))].join('，'),
  };
}

/** A campaign script of three to five host lines; the gift with its conditions. */
export function cjkHeavyCampaign(campaign: Campaign, rng: Rng): Campaign {
  const gift = campaign.gift;
  return {
    ...campaign,
    talkingPoints: rng.sample(campaignScripts, rng.int(3, 5)),
    ...(gift !== undefined ? { gift: campaignGiftLines.find((line) => line.startsWith(gift)) ?? gift } : {}),
  };
}

/** The host's style as a production room describes it. */
export function cjkHeavyHostStyle(style: string): string {
  return hostStyleLines.find((line) => line.startsWith(style)) ?? style;
}
