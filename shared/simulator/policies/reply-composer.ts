import type { ActiveConstraint } from '../../harness/render';
import { advertisingLawTerms } from '../verifier/compliance-rules';

/**
 * Builds a short spoken reply from segments so it meets the hook constraints in force: the tone
 * marker up front, the answer, the coupon mention, all within the length limit. Each segment
 * lists its wordings from fullest to shortest; optional ones are dropped first when the reply
 * is too long, then required ones shrink, longest first.
 */
export interface Segment {
  /** Wordings from fullest to shortest (each must state the same facts). */
  variants: string[];
  required: boolean;
}

export interface ComposeOptions {
  constraints: ActiveConstraint[];
  /** Text that satisfies must_mention constraints, by target, fullest first. */
  mentions?: Partial<Record<'active_coupon' | 'featured_item' | 'campaign', string[]>>;
}

function bannedTerms(constraints: ActiveConstraint[]): string[] {
  const terms = new Set(advertisingLawTerms);
  for (const { constraint } of constraints)
    if (constraint.type === 'banned_terms') for (const term of constraint.terms) terms.add(term);
  return [...terms];
}

export function composeReply(segments: Segment[], options: ComposeOptions): string {
  const banned = bannedTerms(options.constraints);
  const clean = (variants: string[]) =>
    variants.filter((variant) => variant !== '' && !banned.some((term) => variant.includes(term)));
  const parts: Segment[] = [];

  const tone = options.constraints.find((entry) => entry.constraint.type === 'tone')?.constraint;
  if (tone?.type === 'tone') {
    const needed = tone.minMarkers ?? 1;
    const byLength = [...tone.markers].sort((a, b) => b.length - a.length);
    const fullest = tone.markers.slice(0, needed).join('');
    const shortest = byLength.slice(-needed).join('');
    parts.push({ variants: [...new Set([fullest, shortest])], required: true });
  }
  for (const segment of segments) {
    const variants = clean(segment.variants);
    if (variants.length > 0) parts.push({ variants, required: segment.required });
  }
  for (const { constraint } of options.constraints) {
    if (constraint.type !== 'must_mention') continue;
    const variants = clean(options.mentions?.[constraint.target] ?? []);
    if (variants.length > 0) parts.push({ variants, required: true });
  }

  const limit = Math.min(
    ...options.constraints.map(({ constraint }) =>
      constraint.type === 'max_chars' ? constraint.value : Number.POSITIVE_INFINITY,
    ),
  );
  const chosen = parts.map(() => 0);
  const included = parts.map(() => true);
  const text = (): string => {
    const pieces: string[] = [];
    parts.forEach((part, index) => {
      if (included[index]) pieces.push(part.variants[chosen[index]]);
    });
    return `${pieces.join('，')}~`;
  };
  const length = (value: string) => [...value].length;

  for (let index = parts.length - 1; index >= 0 && length(text()) > limit; index--)
    if (!parts[index].required) included[index] = false;
  while (length(text()) > limit) {
    let longest = -1;
    for (let index = 0; index < parts.length; index++) {
      if (!included[index] || chosen[index] >= parts[index].variants.length - 1) continue;
      if (
        longest === -1 ||
        length(parts[index].variants[chosen[index]]) > length(parts[longest].variants[chosen[longest]])
      )
        longest = index;
    }
    if (longest === -1) break;
    chosen[longest]++;
  }
  return text();
}
