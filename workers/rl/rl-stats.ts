import { hsaFamilies, type HsaFamily } from '../../shared/harness/hsa/variant-mapping';
import { rewardComponents } from '../../shared/simulator/verifier/verify-episode';
import type { TokenExactEpisodeView } from '../../shared/models/token-exact/token-exact-episode';
import { passAtK } from './pass-at-k';
import type { ChatLogprobsTotals } from './chat-policy-logprobs';

/**
 * Statistics of the rl stage. Parts return mergeable sums (`RlTotals`, added field by field in
 * part order: the same plan gives the same figures, bit for bit); `buildRlStats` turns them into
 * `stats.json`.
 *
 * Reward figures cover every scored episode played (status ok or step_limit), including groups
 * the stage dropped from its output: dropping zero-variance groups would otherwise inflate or
 * deflate the mean depending on whether they were all-pass or all-fail.
 */

export const RL_STATS_SCHEMA_VERSION = 1;

/** Sums over the scored episodes of one slice. */
export interface RewardBucket {
  episodes: number;
  rewardSum: number;
  rewardSquares: number;
  /** Episodes with reward >= the pass threshold. */
  passes: number;
  /** Sum of each reward component. */
  components: Record<string, number>;
}

/** Per k = 1..G (index k-1): groups with at least k scored episodes, and the sum of their pass@k. */
export interface PassAtKTotals {
  groups: number[];
  sums: number[];
}

export type HarnessKind = 'canonical' | 'variant';

export interface RlTotals {
  groups: {
    played: number;
    canonical: number;
    variant: number;
    /** Written to the output. */
    kept: number;
    zeroVariance: number;
    zeroVarianceDropped: number;
    withFailures: number;
    withFailuresDropped: number;
  };
  episodes: {
    played: number;
    written: number;
    scored: number;
    /** By record status (ok, step_limit, model_error, timeout, mask_failed). */
    byStatus: Record<string, number>;
    /** Token views that failed, by rejection code (whatever the episode's status). */
    tokenViewFailures: Record<string, number>;
  };
  /** Environment steps (policy calls). */
  steps: number;
  /** Over written episodes. */
  tokens: { total: number; trained: number };
  /** By harness kind, then task category. */
  reward: Record<HarnessKind, Record<string, RewardBucket>>;
  /** Variant episodes under each family their variant applied. */
  families: Record<string, RewardBucket>;
  passAtK: Record<HarnessKind, PassAtKTotals>;
  /** Over written scored episodes. */
  advantage: { count: number; absSum: number; zero: number };
  /** Token-exact policies only: episodes as sampled, and how many a fresh render would change. */
  tokenExact?: TokenExactTotals;
  /** Chat-completions policies only: turns that came with logprobs, and whether the endpoint refused them. */
  chatLogprobs?: ChatLogprobsTotals;
}

export interface TokenExactTotals {
  episodes: number;
  turns: number;
  sampledTokens: number;
  /** Episodes whose as-sampled ids differ from a fresh render of the conversation (the as-sampled ids are kept). */
  drifted: number;
  /** Tokens after the first difference, summed over drifted episodes. */
  driftTokens: number;
  /** Episodes whose fresh render failed (no comparison made). */
  unchecked: number;
  /** Turns with tool-call text the template's parser could not read (recorded, penalized by the verifier). */
  malformedTurns: number;
  /** Turns cut by the token limit. */
  truncatedTurns: number;
}

/** Adds one token-exact episode to the totals. */
export function addTokenExact(totals: RlTotals, view: TokenExactEpisodeView): void {
  const into = (totals.tokenExact ??= {
    episodes: 0,
    turns: 0,
    sampledTokens: 0,
    drifted: 0,
    driftTokens: 0,
    unchecked: 0,
    malformedTurns: 0,
    truncatedTurns: 0,
  });
  into.episodes += 1;
  into.turns += view.turns.length;
  for (const turn of view.turns) {
    into.sampledTokens += turn.sampledIds.length;
    if (turn.malformed.length > 0) into.malformedTurns += 1;
    if (turn.finishReason === 'length') into.truncatedTurns += 1;
  }
  if (!view.drift.checked) into.unchecked += 1;
  if (view.drift.drifted) {
    into.drifted += 1;
    into.driftTokens += view.drift.tokens;
  }
}

export function emptyBucket(): RewardBucket {
  return {
    episodes: 0,
    rewardSum: 0,
    rewardSquares: 0,
    passes: 0,
    components: Object.fromEntries(rewardComponents.map((name) => [name, 0])),
  };
}

export function emptyTotals(groupSize: number): RlTotals {
  const passes = (): PassAtKTotals => ({
    groups: new Array<number>(groupSize).fill(0),
    sums: new Array<number>(groupSize).fill(0),
  });
  return {
    groups: {
      played: 0,
      canonical: 0,
      variant: 0,
      kept: 0,
      zeroVariance: 0,
      zeroVarianceDropped: 0,
      withFailures: 0,
      withFailuresDropped: 0,
    },
    episodes: { played: 0, written: 0, scored: 0, byStatus: {}, tokenViewFailures: {} },
    steps: 0,
    tokens: { total: 0, trained: 0 },
    reward: { canonical: {}, variant: {} },
    families: {},
    passAtK: { canonical: passes(), variant: passes() },
    advantage: { count: 0, absSum: 0, zero: 0 },
  };
}

export function addToBucket(
  bucket: RewardBucket,
  reward: number,
  components: Record<string, number>,
  passed: boolean,
): void {
  bucket.episodes += 1;
  bucket.rewardSum += reward;
  bucket.rewardSquares += reward * reward;
  if (passed) bucket.passes += 1;
  for (const [name, value] of Object.entries(components))
    bucket.components[name] = (bucket.components[name] ?? 0) + value;
}

/** Adds a group's pass@k for every k its scored episodes allow. */
export function addPassAtK(totals: PassAtKTotals, scored: number, passed: number): void {
  for (let k = 1; k <= Math.min(scored, totals.groups.length); k++) {
    totals.groups[k - 1] += 1;
    totals.sums[k - 1] += passAtK(scored, passed, k);
  }
}

/** Adds `source` into `target`: numbers summed, arrays element-wise, objects key by key (missing keys copied). */
export function addInto<T>(target: T, source: T): T {
  const into = target as Record<string, unknown>;
  for (const [key, value] of Object.entries(source as Record<string, unknown>)) {
    const current = into[key];
    if (typeof value === 'number') into[key] = (typeof current === 'number' ? current : 0) + value;
    else if (value !== null && typeof value === 'object') {
      if (current === undefined) into[key] = structuredClone(value);
      else addInto(current, value);
    }
  }
  return target;
}

/** What people read about one slice of episodes. */
export interface RewardSummary {
  episodes: number;
  /** Mean total reward (null without episodes). */
  mean: number | null;
  /** Sample std of the total reward (null with fewer than two episodes). */
  std: number | null;
  /** Share with reward >= the pass threshold. */
  passRate: number | null;
  /** Mean of each reward component. */
  components: Record<string, number | null>;
}

export interface PassAtKEntry {
  k: number;
  /** Mean pass@k over the groups with at least k scored episodes (null when none). */
  value: number | null;
  groups: number;
}

export interface RlStats {
  schemaVersion: typeof RL_STATS_SCHEMA_VERSION;
  policy: {
    provider: string;
    modelId: string;
    simulated: boolean;
    tokenExact?: boolean;
    logprobDistribution?: Record<string, unknown>;
  };
  tokenizer: { name: string; fingerprint: string; templateHash: string };
  settings: Record<string, unknown>;
  counts: Pick<RlTotals, 'groups' | 'episodes' | 'steps' | 'tokens'>;
  /** All scored episodes, and split by harness kind. */
  reward: Record<'all' | HarnessKind, RewardSummary>;
  byCategory: Record<string, Record<'all' | HarnessKind, RewardSummary>>;
  /** `canonical`, then each HSA family (variant episodes whose variant applied it). */
  byFamily: Record<string, RewardSummary>;
  passAtK: Record<'all' | HarnessKind, PassAtKEntry[]>;
  /** The number HAT exists to shrink: how much worse the policy does under harness variants. */
  canonicalVariantGap: {
    canonicalMean: number | null;
    variantMean: number | null;
    /** canonicalMean - variantMean (positive: variants hurt). */
    gap: number | null;
    /** Standard error of the gap, episodes treated as independent (Welch). */
    standardError: number | null;
    /** Per-category gaps weighted by variant episodes, over categories played under both (removes task-mix differences). */
    categoryMatchedGap: number | null;
    categoriesMatched: number;
    /** pass@1 canonical - pass@1 variant. */
    passAt1Gap: number | null;
    canonicalEpisodes: number;
    variantEpisodes: number;
    canonicalGroups: number;
    variantGroups: number;
  };
  advantage: { written: number; meanAbs: number | null; zeroShare: number | null };
  /** Token-exact policies only (see TokenExactTotals); `driftRate` = drifted / episodes. */
  tokenExact?: TokenExactTotals & { driftRate: number | null };
  /** Chat-completions policies only (see ChatLogprobsTotals); of `policy.logprobDistribution`. */
  chatLogprobs?: ChatLogprobsTotals;
}

const round = (value: number): number => Math.round(value * 1e6) / 1e6;
const ratio = (part: number, whole: number): number | null => (whole === 0 ? null : round(part / whole));

function mergeBuckets(buckets: Iterable<RewardBucket>): RewardBucket {
  const merged = emptyBucket();
  for (const bucket of buckets) addInto(merged, bucket);
  return merged;
}

export function summarize(bucket: RewardBucket): RewardSummary {
  const n = bucket.episodes;
  const mean = n === 0 ? null : bucket.rewardSum / n;
  const variance = n < 2 || mean === null ? null : Math.max(0, (bucket.rewardSquares - n * mean * mean) / (n - 1));
  return {
    episodes: n,
    mean: mean === null ? null : round(mean),
    std: variance === null ? null : round(Math.sqrt(variance)),
    passRate: ratio(bucket.passes, n),
    components: Object.fromEntries(Object.entries(bucket.components).map(([name, sum]) => [name, ratio(sum, n)])),
  };
}

function passEntries(totals: PassAtKTotals): PassAtKEntry[] {
  return totals.groups.map((groups, index) => ({ k: index + 1, value: ratio(totals.sums[index], groups), groups }));
}

function gapOf(totals: RlTotals): RlStats['canonicalVariantGap'] {
  const canonical = mergeBuckets(Object.values(totals.reward.canonical));
  const variant = mergeBuckets(Object.values(totals.reward.variant));
  const canonicalSummary = summarize(canonical);
  const variantSummary = summarize(variant);
  const gap =
    canonicalSummary.mean !== null && variantSummary.mean !== null
      ? canonical.rewardSum / canonical.episodes - variant.rewardSum / variant.episodes
      : null;
  const varianceOf = (bucket: RewardBucket) => {
    const mean = bucket.rewardSum / bucket.episodes;
    return (bucket.rewardSquares - bucket.episodes * mean * mean) / (bucket.episodes - 1);
  };
  const standardError =
    canonical.episodes >= 2 && variant.episodes >= 2
      ? Math.sqrt(
          Math.max(0, varianceOf(canonical)) / canonical.episodes + Math.max(0, varianceOf(variant)) / variant.episodes,
        )
      : null;
  let weighted = 0;
  let weight = 0;
  let matched = 0;
  for (const [category, variantBucket] of Object.entries(totals.reward.variant)) {
    const canonicalBucket = totals.reward.canonical[category];
    if (!canonicalBucket || canonicalBucket.episodes === 0 || variantBucket.episodes === 0) continue;
    matched++;
    weighted +=
      variantBucket.episodes *
      (canonicalBucket.rewardSum / canonicalBucket.episodes - variantBucket.rewardSum / variantBucket.episodes);
    weight += variantBucket.episodes;
  }
  const passCanonical = ratio(totals.passAtK.canonical.sums[0] ?? 0, totals.passAtK.canonical.groups[0] ?? 0);
  const passVariant = ratio(totals.passAtK.variant.sums[0] ?? 0, totals.passAtK.variant.groups[0] ?? 0);
  return {
    canonicalMean: canonicalSummary.mean,
    variantMean: variantSummary.mean,
    gap: gap === null ? null : round(gap),
    standardError: standardError === null ? null : round(standardError),
    categoryMatchedGap: weight === 0 ? null : round(weighted / weight),
    categoriesMatched: matched,
    passAt1Gap: passCanonical !== null && passVariant !== null ? round(passCanonical - passVariant) : null,
    canonicalEpisodes: canonical.episodes,
    variantEpisodes: variant.episodes,
    canonicalGroups: totals.groups.canonical,
    variantGroups: totals.groups.variant,
  };
}

export interface RlStatsContext {
  policy: RlStats['policy'];
  tokenizer: RlStats['tokenizer'];
  settings: Record<string, unknown>;
}

/** Merges the parts' totals (in part order) and derives the figures of `stats.json`. */
export function buildRlStats(parts: readonly RlTotals[], context: RlStatsContext): RlStats {
  const totals = parts.slice(1).reduce((merged, part) => addInto(merged, part), structuredClone(parts[0]));
  const kinds: HarnessKind[] = ['canonical', 'variant'];
  const categories = [...new Set(kinds.flatMap((kind) => Object.keys(totals.reward[kind])))].sort();
  const byKind = (kind: HarnessKind) => mergeBuckets(Object.values(totals.reward[kind]));
  const all = mergeBuckets(kinds.map(byKind));
  const byCategory = Object.fromEntries(
    categories.map((category) => {
      const canonical = totals.reward.canonical[category] ?? emptyBucket();
      const variant = totals.reward.variant[category] ?? emptyBucket();
      return [
        category,
        {
          all: summarize(mergeBuckets([canonical, variant])),
          canonical: summarize(canonical),
          variant: summarize(variant),
        },
      ];
    }),
  );
  const families = [
    ...hsaFamilies,
    ...Object.keys(totals.families)
      .filter((family) => !hsaFamilies.includes(family as HsaFamily))
      .sort(),
  ];
  const byFamily: Record<string, RewardSummary> = { canonical: summarize(byKind('canonical')) };
  for (const family of families) byFamily[family] = summarize(totals.families[family] ?? emptyBucket());
  const passAll: PassAtKTotals = addInto(structuredClone(totals.passAtK.canonical), totals.passAtK.variant);
  return {
    schemaVersion: RL_STATS_SCHEMA_VERSION,
    policy: context.policy,
    tokenizer: context.tokenizer,
    settings: context.settings,
    counts: {
      groups: totals.groups,
      episodes: sortedCounts(totals.episodes),
      steps: totals.steps,
      tokens: totals.tokens,
    },
    reward: { all: summarize(all), canonical: summarize(byKind('canonical')), variant: summarize(byKind('variant')) },
    byCategory,
    byFamily,
    passAtK: {
      all: passEntries(passAll),
      canonical: passEntries(totals.passAtK.canonical),
      variant: passEntries(totals.passAtK.variant),
    },
    canonicalVariantGap: gapOf(totals),
    advantage: {
      written: totals.advantage.count,
      meanAbs: ratio(totals.advantage.absSum, totals.advantage.count),
      zeroShare: ratio(totals.advantage.zero, totals.advantage.count),
    },
    ...(totals.tokenExact
      ? {
          tokenExact: { ...totals.tokenExact, driftRate: ratio(totals.tokenExact.drifted, totals.tokenExact.episodes) },
        }
      : {}),
    ...(totals.chatLogprobs ? { chatLogprobs: totals.chatLogprobs } : {}),
  };
}

/** Count maps in key order, so stats.json does not depend on which status a part met first. */
function sortedCounts(episodes: RlTotals['episodes']): RlTotals['episodes'] {
  const sorted = (counts: Record<string, number>) =>
    Object.fromEntries(Object.entries(counts).sort(([left], [right]) => left.localeCompare(right)));
  return { ...episodes, byStatus: sorted(episodes.byStatus), tokenViewFailures: sorted(episodes.tokenViewFailures) };
}
