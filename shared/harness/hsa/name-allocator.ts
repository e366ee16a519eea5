import type { Rng } from '../../random/rng';
import { mentions } from './text-renamer';

/**
 * Name generators for HSA renames: casing styles (snake, camel, kebab, Pascal), descriptive
 * synonyms (`get_item_detail` -> `fetch_product_info`), opaque codes (`SK-7f3a`) and random
 * letters (as in Hammer's function masking). `NameAllocator` keeps the chosen names unique and
 * keeps every new name free of every old one, so the leak check can never mistake a new name
 * for an old name it contains (`item` inside `get-item`).
 */

export const namingStyles = [
  'snake',
  'camel',
  'kebab',
  'pascal',
  'synonym_snake',
  'synonym_camel',
  'opaque',
  'random',
] as const;
export type NamingStyle = (typeof namingStyles)[number];

/** English word synonyms that keep what a tool, parameter or skill is about. */
const wordSynonyms: Record<string, readonly string[]> = {
  get: ['fetch', 'lookup', 'query', 'read'],
  search: ['find', 'lookup', 'browse'],
  item: ['product', 'goods', 'listing'],
  items: ['products', 'goods', 'listings'],
  detail: ['info', 'details', 'profile'],
  sku: ['variant', 'spec'],
  stock: ['inventory', 'availability'],
  promotions: ['deals', 'offers', 'coupons'],
  quote: ['calc', 'estimate', 'compute'],
  final: ['net', 'checkout'],
  price: ['cost', 'amount'],
  recommend: ['suggest', 'advise'],
  size: ['fit', 'sizing'],
  compare: ['contrast', 'diff'],
  after: ['post'],
  sales: ['purchase', 'order'],
  policy: ['rules', 'terms'],
  live: ['stream', 'broadcast'],
  script: ['rundown', 'plan', 'schedule'],
  id: ['code', 'key', 'ref'],
  ids: ['codes', 'keys', 'refs'],
  query: ['keywords', 'text', 'terms'],
  category: ['kind', 'segment', 'group'],
  max: ['upper', 'top'],
  limit: ['top_k', 'count', 'size_limit'],
  quantity: ['qty', 'count', 'units'],
  height: ['stature', 'body_height'],
  weight: ['mass', 'body_weight'],
  color: ['colour', 'shade'],
  topic: ['subject', 'aspect'],
  product: ['item', 'goods'],
  qa: ['questions', 'answers', 'faq'],
  calculation: ['calc', 'pricing'],
  push: ['promo', 'boost'],
  advice: ['guide', 'help'],
  chat: ['talk', 'banter'],
  compliance: ['legal', 'safe_wording'],
  engagement: ['interaction', 'community'],
};

/** Lowercase words of an identifier in any casing (`getItemDetail`, `get-item-detail`, `get_item_detail`). */
export function splitWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word !== '')
    .map((word) => word.toLowerCase());
}

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

export function joinWords(words: string[], casing: 'snake' | 'camel' | 'kebab' | 'pascal'): string {
  const flat = words.flatMap((word) => word.split('_'));
  switch (casing) {
    case 'snake':
      return flat.join('_');
    case 'kebab':
      return flat.join('-');
    case 'camel':
      return flat.map((word, index) => (index === 0 ? word : capitalize(word))).join('');
    case 'pascal':
      return flat.map(capitalize).join('');
  }
}

function hex(rng: Rng, length: number): string {
  let text = '';
  for (let index = 0; index < length; index++) text += '0123456789abcdef'[rng.int(0, 15)];
  return text;
}

function letters(rng: Rng, length: number): string {
  let text = '';
  for (let index = 0; index < length; index++) text += 'abcdefghijklmnopqrstuvwxyz'[rng.int(0, 25)];
  return text;
}

/** What the name is for: opaque codes carry a prefix by kind, and parameter names stay short. */
export type NameRole = 'tool' | 'parameter' | 'skill' | 'section' | 'hook';

const opaquePrefix: Record<NameRole, string> = { tool: 'T', parameter: 'p', skill: 'SK', section: 'sec', hook: 'hk' };

/** One candidate name for `name` in `style` (random parts drawn from `rng`). */
export function styleName(name: string, style: NamingStyle, role: NameRole, rng: Rng): string {
  const words = splitWords(name);
  if (words.length === 0) words.push(role);
  const synonyms = () => words.map((word) => (wordSynonyms[word] ? rng.pick(wordSynonyms[word]) : word));
  switch (style) {
    case 'snake':
    case 'camel':
    case 'kebab':
    case 'pascal':
      return joinWords(words, style);
    case 'synonym_snake':
      return joinWords(synonyms(), 'snake');
    case 'synonym_camel':
      return joinWords(synonyms(), 'camel');
    case 'opaque':
      // Section and hook ids become XML tag names: they must start with a letter or "_".
      return role === 'parameter' || role === 'section' || role === 'hook'
        ? `${opaquePrefix[role]}_${hex(rng, 4)}`
        : `${opaquePrefix[role]}-${hex(rng, 4)}`;
    case 'random':
      return letters(rng, role === 'parameter' ? rng.int(4, 10) : rng.int(5, 15));
  }
}

/** A family could not find a new name that clashes with nothing: the variant is dropped. */
export class NamesExhaustedError extends Error {}

/**
 * Hands out new names: unique among themselves and the names kept, different from every old
 * name, and never containing an old name the way the leak check would find it.
 */
export class NameAllocator {
  private readonly taken: Set<string>;
  private readonly oldNames: string[];

  /** `taken` may be shared between allocators, so names handed out for tools, parameters and skills never coincide. */
  constructor(
    oldNames: Iterable<string>,
    private readonly valid: (name: string) => boolean = () => true,
    taken: Set<string> = new Set(),
  ) {
    this.oldNames = [...new Set(oldNames)];
    this.taken = taken;
    for (const name of this.oldNames) this.taken.add(name);
  }

  /** Marks a name as used (a name kept as it was, a name chosen elsewhere). */
  reserve(name: string): void {
    this.taken.add(name);
  }

  isFree(name: string): boolean {
    return this.valid(name) && !this.taken.has(name) && !this.oldNames.some((old) => mentions(name, old));
  }

  /** The first free candidate, else `fallback()` until one is free. */
  allocate(candidates: Iterable<string>, fallback: () => string): string {
    for (const candidate of candidates) {
      if (this.isFree(candidate)) {
        this.taken.add(candidate);
        return candidate;
      }
    }
    for (let attempt = 0; attempt < 1000; attempt++) {
      const candidate = fallback();
      if (this.isFree(candidate)) {
        this.taken.add(candidate);
        return candidate;
      }
    }
    throw new NamesExhaustedError(
      `no free name found after 1000 draws (last candidates clash with names the harness already uses)`,
    );
  }
}

/** Candidates for renaming `name` in `style`, then the other styles as fallbacks (all seeded). */
export function renameCandidates(name: string, style: NamingStyle, role: NameRole, rng: Rng): string[] {
  const candidates = [styleName(name, style, role, rng)];
  for (let attempt = 0; attempt < 3; attempt++) candidates.push(styleName(name, style, role, rng));
  for (const other of ['synonym_snake', 'synonym_camel', 'camel', 'opaque'] as const)
    candidates.push(styleName(name, other, role, rng));
  return candidates;
}
