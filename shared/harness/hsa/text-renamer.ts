/**
 * Consistent renaming inside free text (skill bodies, prompt sections, descriptions, hook text,
 * tool results) and the leak check that mirrors it. One regular expression per table replaces
 * every name in a single pass, longest first, so `a -> b, b -> c` never chains into `a -> c`.
 *
 * ASCII identifiers (`get_item_detail`, `item_id`, `SK-7f3a`) only match at identifier
 * boundaries, so renaming `size` leaves `recommend_size` and `sizes` alone; phrases in other
 * scripts (`售后答疑`) match as substrings, which is how Chinese text refers to them. Hook
 * placeholders (`{value}`, `{coupon}`, ...) are never touched: the renderer fills them.
 */

/** Who may see a renamed name, which decides where it is rewritten and checked for leaks. */
export type RenameScope =
  /** Tool names and skill ids: rewritten and checked in every model-visible text, tool results and replies included. */
  | 'entity'
  /** Parameter names, enum values, skill names, section ids and titles, hook ids: harness-authored text only (tool results are environment data that keeps canonical field names). */
  | 'harness';

export type RenameKind =
  'tool' | 'parameter' | 'enum_value' | 'skill_id' | 'skill_name' | 'section_id' | 'section_title' | 'hook_id';

export interface TextRename {
  from: string;
  to: string;
  kind: RenameKind;
  scope: RenameScope;
}

/** A name that should be gone but was found, with where. */
export interface Leak {
  name: string;
  kind: RenameKind;
  /** Where it was found (a harness field or a message). */
  where: string;
}

const identifierPattern = /^[A-Za-z0-9_]+(?:[-. ][A-Za-z0-9_]+)*$/;
const wordCharacter = 'A-Za-z0-9_';
const placeholderPattern = String.raw`\{(?:value|coupon|featured_item|campaign)\}`;

/** Phrases shorter than this (in characters) are too likely to occur in unrelated text to be renamed in free text. */
export const MIN_PHRASE_LENGTH = 4;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Whether `name` is matched at identifier boundaries (ASCII) rather than as a substring. */
export function isIdentifierLike(name: string): boolean {
  return identifierPattern.test(name);
}

/** Whether a rename is specific enough to rewrite in free text (identifiers always; phrases from MIN_PHRASE_LENGTH characters). */
export function renamesInText(name: string): boolean {
  return isIdentifierLike(name) || [...name].length >= MIN_PHRASE_LENGTH;
}

function patternOf(name: string): string {
  const escaped = escapeRegExp(name);
  return isIdentifierLike(name) ? `(?<![${wordCharacter}])${escaped}(?![${wordCharacter}])` : escaped;
}

/** Builds the alternation for a set of names, longest first so a longer name wins over its prefix. */
function alternation(names: string[]): RegExp | undefined {
  if (names.length === 0) return undefined;
  const sorted = [...new Set(names)].sort(
    (left, right) => right.length - left.length || (left < right ? -1 : left > right ? 1 : 0),
  );
  return new RegExp(`${placeholderPattern}|${sorted.map(patternOf).join('|')}`, 'g');
}

/** Whether `text` mentions `name` the way the renamer would match it. */
export function mentions(text: string, name: string): boolean {
  return new RegExp(patternOf(name)).test(text);
}

/** A table of renames, compiled once, applied to many texts. */
export class TextRenamer {
  private readonly targets = new Map<string, TextRename>();
  private readonly pattern: RegExp | undefined;

  constructor(renames: readonly TextRename[]) {
    for (const rename of renames) {
      if (rename.from === rename.to || !renamesInText(rename.from)) continue;
      if (!this.targets.has(rename.from)) this.targets.set(rename.from, rename);
    }
    this.pattern = alternation([...this.targets.keys()]);
  }

  get size(): number {
    return this.targets.size;
  }

  /** Whether the text may hold a name at all (a substring test per name is far cheaper than the boundary-aware pattern). */
  private mayContain(text: string): boolean {
    for (const name of this.targets.keys()) if (text.includes(name)) return true;
    return false;
  }

  /** The text with every name replaced (placeholders kept). */
  apply(text: string): string {
    if (this.pattern === undefined || text === '' || !this.mayContain(text)) return text;
    this.pattern.lastIndex = 0;
    return text.replace(this.pattern, (match) => this.targets.get(match)?.to ?? match);
  }

  /** Names of the table still present in `text`. */
  findLeaks(text: string, where: string): Leak[] {
    if (this.pattern === undefined || text === '' || !this.mayContain(text)) return [];
    const leaks: Leak[] = [];
    const seen = new Set<string>();
    this.pattern.lastIndex = 0;
    for (const match of text.matchAll(this.pattern)) {
      const rename = this.targets.get(match[0]);
      if (rename === undefined || seen.has(rename.from)) continue;
      seen.add(rename.from);
      leaks.push({ name: rename.from, kind: rename.kind, where });
    }
    return leaks;
  }
}
