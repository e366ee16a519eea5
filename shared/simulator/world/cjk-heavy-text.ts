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
import type { AfterSalesPolicy, Campaign, Category, Item } from './room-snapshot';

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

/** Title words per product: its own, then its category's (built once, not per item). */
const titleWordsByProduct = new Map<string, readonly string[]>();

function wordsFor(template: SubcategoryTemplate): readonly string[] {
  let words = titleWordsByProduct.get(template.name);
  if (words === undefined) {
    words = [...(titleWords[template.name] ?? []), ...categoryTitleWords[template.category]];
    titleWordsByProduct.set(template.name, words);
  }
  return words;
}

/**
 * A keyword-stuffed title: tag, brand, launch word, the default title's words, then product and
 * category words. Lengths are UTF-16 lengths: every character here is in the BMP, where they are
 * the character count (the tests count code points).
 */
function longTitle(item: Item, template: SubcategoryTemplate, rng: Rng): string {
  const words = item.title.slice(item.brand.length + 1);
  let title = `${rng.chance(0.6) ? rng.pick(titleTags) : ''}${item.brand}${rng.pick(launchWords)}${words}`;
  const target = rng.int(32, 58);
  for (const word of rng.shuffle(wordsFor(template))) {
    if (title.length >= target) break;
    if (title.length + word.length <= titleLimit) title += word;
  }
  return title;
}

/** Spec notes by key (else by category), shortest first, so the ones that fit are a prefix. */
const notesByLength = (notes: readonly string[]): readonly string[] => [...notes].sort((a, b) => a.length - b.length);
const specNotes = new Map(Object.entries(specDetails).map(([key, notes]) => [key, notesByLength(notes)]));
const categoryNotes = Object.fromEntries(
  Object.entries(categorySpecDetails).map(([category, notes]) => [category, notesByLength(notes)]),
) as Record<Category, readonly string[]>;

/** Each value of two characters or more gets a note in parentheses, within `specValueLimit`. */
function longSpecs(item: Item, rng: Rng): Record<string, string> {
  const specs: Record<string, string> = {};
  for (const [key, value] of Object.entries(item.specs)) {
    const notes = specNotes.get(key) ?? categoryNotes[item.category];
    const room = specValueLimit - value.length - 2;
    let fitting = 0;
    if (key !== '可选规格' && value.length >= 2)
      while (fitting < notes.length && notes[fitting].length <= room) fitting++;
    specs[key] = fitting > 0 ? `${value}（${notes[rng.int(0, fitting - 1)]}）` : value;
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
