import { z } from 'zod';

/**
 * The promotion gate of a run: after the eval stage, thresholds decide whether the candidate
 * checkpoint is promoted (it becomes what `latestCheckpoint` resolves to for the next run) or
 * held, with the reasons recorded in the run manifest and report.
 *
 * ```yaml
 * gate:
 *   eval: eval                      # the eval stage whose scores it reads (default "eval")
 *   candidate: new                  # the model label it decides about
 *   rules:
 *     - live_stream_qa >= promoted - 0.5
 *     - harness_variant_qa >= base
 *     - ifeval.prompt_strict >= base - 1.0
 *     - harness_variant_qa.gap <= 5
 *   before: [replay]                # stages that run only for a promoted candidate
 * ```
 *
 * A rule is `<metric> <op> <reference>`: a metric of scores.json (`live_stream_qa`,
 * `live_stream_qa.price`, `harness_variant_qa.gap`, `ifeval.prompt_strict`, `judge.custom`, ...),
 * an operator (`>=`, `>`, `<=`, `<`), and a number or a model label with an optional `+`/`-`
 * offset, read as that model's value of the same metric.
 *
 * Significance: `delta(<suite>, <label>)` is the paired difference candidate − label on the
 * suite's headline items (scores.json `comparisons`, which the eval's `compare` pairs decide), and
 * `delta(<suite>, <label>).low` / `.high` the ends of its paired-bootstrap 95% interval, compared
 * with a number: `delta(ifeval, promoted).low > 0` (significantly better), `delta(ifeval,
 * promoted).high > 0` (the interval reaches above 0: not significantly worse),
 * `delta(ifeval, promoted).low >= -2` (non-inferior within 2 points). A rule may list
 * alternatives with `or`: it holds when any of them holds (`delta(live_stream_qa, promoted).low > 0
 * or delta(ifeval, promoted).low > 0`: significantly better on one of them).
 *
 * Beyond the rules, the gate holds a candidate whose error rate (items whose request failed or
 * timed out) exceeds `maxErrorRate` (default 0.01), and one that is not a real model (the local
 * test server, random weights, a simulation policy) unless `allowSimulated: true`. Planning adds a `gate` stage reading
 * `${stages.<eval>.manifestUri}`; the `before` stages read it, so they run after it, and a hold
 * keeps them from running: the gate job completes with the decision (a hold is not a failure) and
 * they complete at once without running; runs show the gate as held and them as not run.
 */

/** Name of the stage planning adds for a run's `gate:` section. */
export const gateStageName = 'gate';

export const gateOperators = ['>=', '>', '<=', '<'] as const;
export type GateOperator = (typeof gateOperators)[number];

/** One parsed rule (or one alternative of an `or` rule). */
export interface GateRule {
  text: string;
  metric: string;
  operator: GateOperator;
  reference: { kind: 'number'; value: number } | { kind: 'model'; label: string; offset: number };
  /** `delta(<metric>, <label>)[.low|.high]`: the paired difference candidate − label (or an end of its interval) is compared with the number. */
  delta?: { label: string; field: 'score' | 'low' | 'high' };
}

const deltaPattern =
  /^\s*delta\(\s*([a-z][a-z0-9_]*(?:\.[a-z0-9_-]+)*)\s*,\s*([a-z][a-z0-9_-]*)\s*\)(?:\.(low|high|score))?\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)\s*$/;

const rulePattern =
  /^\s*([a-z][a-z0-9_]*(?:\.[a-z0-9_-]+)*)\s*(>=|<=|>|<)\s*(?:(-?\d+(?:\.\d+)?)|([a-z][a-z0-9_-]*)\s*(?:([+-])\s*(\d+(?:\.\d+)?))?)\s*$/;

/** Parses a rule; a message saying how to write it when it does not parse. */
export function parseGateRule(text: string): GateRule | { error: string } {
  const delta = deltaPattern.exec(text);
  if (delta) {
    const [, metric, label, field, operator, number] = delta as unknown as [
      string,
      string,
      string,
      'low' | 'high' | 'score' | undefined,
      GateOperator,
      string,
    ];
    return {
      text,
      metric,
      operator,
      reference: { kind: 'number', value: Number(number) },
      delta: { label, field: field ?? 'score' },
    };
  }
  const match = rulePattern.exec(text);
  if (!match) {
    return {
      error: `"${text}" is not a gate rule; write <metric> <op> <number | label [+|- number]>, e.g. "live_stream_qa >= baseline - 0.5" or "ifeval.prompt_strict > 80", or delta(<suite>, <label>)[.low|.high] <op> <number>, e.g. "delta(ifeval, promoted).low > 0"; join alternatives with " or "`,
    };
  }
  const [, metric, operator, number, label, sign, offset] = match as unknown as [
    string,
    string,
    GateOperator,
    string | undefined,
    string | undefined,
    string | undefined,
    string | undefined,
  ];
  if (number !== undefined) return { text, metric, operator, reference: { kind: 'number', value: Number(number) } };
  return {
    text,
    metric,
    operator,
    reference: {
      kind: 'model',
      label: label as string,
      offset: offset === undefined ? 0 : (sign === '-' ? -1 : 1) * Number(offset),
    },
  };
}

/** The alternatives of a rule (`a or b`: one, or more); the first that does not parse is the error. */
export function parseGateRuleAlternatives(text: string): GateRule[] | { error: string } {
  const rules: GateRule[] = [];
  for (const alternative of text.split(/\s+or\s+/)) {
    const rule = parseGateRule(alternative);
    if ('error' in rule) return rule;
    rules.push(rule);
  }
  return rules;
}

export const gateConfigSchema = z
  .object({
    /** The eval stage whose scores it reads. Default "eval". */
    eval: z.string().min(1).default('eval'),
    /** The label (in the eval's models) of the checkpoint to promote or hold. */
    candidate: z.string().min(1),
    /** Every rule must hold for a promotion. */
    rules: z
      .array(z.string().min(1))
      .min(1)
      .superRefine((rules, context) => {
        rules.forEach((rule, index) => {
          const parsed = parseGateRuleAlternatives(rule);
          if ('error' in parsed) context.addIssue({ code: 'custom', path: [index], message: parsed.error });
        });
      }),
    /** Stages that run only when the candidate is promoted (e.g. [replay]). Default none. */
    before: z.array(z.string().min(1)).default([]),
    /** Write the promoted-checkpoint pointer on a promotion. Default true (false: decide and record only). */
    promote: z.boolean().default(true),
    /** Hold a candidate when more than this share of its items failed or timed out (0–1). Default 0.01. */
    maxErrorRate: z.number().min(0).max(1).default(0.01),
    /** Gate a candidate that is not a real model (local test server, random weights, simulation policy). Default false: hold it. */
    allowSimulated: z.boolean().default(false),
  })
  .strict();
export type GateConfig = z.infer<typeof gateConfigSchema>;

/** One rule as the gate judged it. */
export interface GateCheck {
  rule: string;
  metric: string;
  /** The candidate's value (null: the metric is missing for it). */
  value: number | null;
  /** The value it was compared against (null: the reference model lacks the metric). */
  threshold: number | null;
  passed: boolean;
  /** One line a person reads: `live_stream_qa 80.00 < promoted 85.00 - 0.5 = 84.50`. */
  reason: string;
}

export interface GateDecision {
  decision: 'promote' | 'hold';
  candidate: string;
  checks: GateCheck[];
  /** The failed checks' reasons (hold), or every check's (promote). */
  reasons: string[];
}

const format = (value: number) => value.toFixed(2);

/** A paired comparison as scores.json keeps it (`comparisons`): a − b on a suite's headline items. */
export interface PairedComparison {
  a: string;
  b: string;
  suite: string;
  difference: { score: number; low: number; high: number; items: number };
}

/** What the gate knows about the candidate beyond its metrics (scores.json), and its limits. */
export interface GateEvidence {
  /** Paired differences with bootstrap intervals (scores.json `comparisons`): what `delta(...)` reads. */
  comparisons?: readonly PairedComparison[];
  /** The candidate's failed items (request failed or timed out) of the items it was asked. */
  errors?: { failed: number; items: number };
  /** Why the candidate is not a real model (test server, random weights, simulation); absent: it is one. */
  simulated?: string;
  /** Default 0.01. */
  maxErrorRate?: number;
  /** Default false. */
  allowSimulated?: boolean;
}

/** The suite a `delta(...)` metric names: a suite or its headline metric. */
const deltaSuites: Record<string, string> = {
  live_stream_qa: 'live_stream_qa',
  harness_variant_qa: 'harness_variant_qa',
  'harness_variant_qa.variant': 'harness_variant_qa',
  ifeval: 'ifeval',
  'ifeval.prompt_strict': 'ifeval',
  custom: 'custom',
};

const signed = (value: number) => `${value >= 0 ? '+' : ''}${format(value)}`;

function compare(value: number, operator: GateOperator, threshold: number): boolean {
  return operator === '>='
    ? value >= threshold
    : operator === '>'
      ? value > threshold
      : operator === '<='
        ? value <= threshold
        : value < threshold;
}

const negated: Record<GateOperator, string> = { '>=': '<', '>': '<=', '<=': '>', '<': '>=' };

/** One alternative judged: passed, the candidate's value and threshold, and why. */
function judgeRule(
  rule: GateRule,
  candidate: string,
  metrics: Record<string, Record<string, number>>,
  evidence: GateEvidence,
): Omit<GateCheck, 'rule'> {
  if (rule.delta) {
    const { label, field } = rule.delta;
    const threshold = (rule.reference as { value: number }).value;
    const term = `delta(${rule.metric}, ${label})${field === 'score' ? '' : `.${field}`}`;
    const suite = deltaSuites[rule.metric];
    if (suite === undefined)
      return {
        metric: rule.metric,
        value: null,
        threshold,
        passed: false,
        reason: `${term}: paired intervals exist for suite headlines only (${Object.keys(deltaSuites).join(', ')})`,
      };
    const found = (evidence.comparisons ?? []).find(
      (comparison) =>
        comparison.suite === suite &&
        ((comparison.a === candidate && comparison.b === label) ||
          (comparison.a === label && comparison.b === candidate)),
    );
    if (!found)
      return {
        metric: rule.metric,
        value: null,
        threshold,
        passed: false,
        reason: `${term}: the scores have no paired comparison of ${candidate} and ${label} on ${suite} (add [${candidate}, ${label}] to the eval's compare)`,
      };
    const { difference } = found;
    // A comparison written the other way round (label − candidate) is turned around.
    const interval =
      found.a === candidate
        ? difference
        : { score: -difference.score, low: -difference.high, high: -difference.low, items: difference.items };
    const value = interval[field];
    const passed = compare(value, rule.operator, threshold);
    return {
      metric: rule.metric,
      value,
      threshold,
      passed,
      reason: `${term} ${signed(value)} ${passed ? rule.operator : negated[rule.operator]} ${format(threshold)} (${candidate} − ${label} on ${suite}: ${signed(interval.score)} [${signed(interval.low)}, ${signed(interval.high)}], ${interval.items} items)`,
    };
  }
  const value = metrics[candidate]?.[rule.metric] ?? null;
  let threshold: number | null;
  let describe: string;
  if (rule.reference.kind === 'number') {
    threshold = rule.reference.value;
    describe = format(threshold);
  } else {
    const base = metrics[rule.reference.label]?.[rule.metric];
    threshold = base === undefined ? null : base + rule.reference.offset;
    const offset =
      rule.reference.offset === 0 ? '' : ` ${rule.reference.offset > 0 ? '+' : '-'} ${Math.abs(rule.reference.offset)}`;
    describe =
      base === undefined
        ? `${rule.reference.label}${offset}`
        : `${rule.reference.label} ${format(base)}${offset}${offset ? ` = ${format(threshold as number)}` : ''}`;
  }
  if (value === null)
    return {
      metric: rule.metric,
      value,
      threshold,
      passed: false,
      reason: `${rule.metric}: the candidate ${candidate} has no such score (not evaluated?)`,
    };
  if (threshold === null) {
    const label = (rule.reference as { label: string }).label;
    const known = Object.keys(metrics);
    return {
      metric: rule.metric,
      value,
      threshold,
      passed: false,
      reason: `${rule.metric}: no ${label} score to compare with${known.includes(label) ? '' : ` (${label} is not an evaluated model; labels: ${known.join(', ')})`}`,
    };
  }
  const passed = compare(value, rule.operator, threshold);
  return {
    metric: rule.metric,
    value,
    threshold,
    passed,
    reason: `${rule.metric} ${format(value)} ${passed ? rule.operator : negated[rule.operator]} ${describe}`,
  };
}

/** The checks every candidate gets beyond the rules: its error rate, and whether it is a real model. */
function guardChecks(candidate: string, evidence: GateEvidence): GateCheck[] {
  const checks: GateCheck[] = [];
  const maxErrorRate = evidence.maxErrorRate ?? 0.01;
  if (evidence.errors) {
    const { failed, items } = evidence.errors;
    const rate = items === 0 ? 0 : failed / items;
    const passed = rate <= maxErrorRate;
    checks.push({
      rule: `maxErrorRate ${maxErrorRate}`,
      metric: 'error_rate',
      value: rate * 100,
      threshold: maxErrorRate * 100,
      passed,
      reason: `error rate of ${candidate} ${format(rate * 100)}% (${failed} of ${items} items failed or timed out) ${passed ? '<=' : '>'} maxErrorRate ${format(maxErrorRate * 100)}%`,
    });
  } else
    checks.push({
      rule: `maxErrorRate ${maxErrorRate}`,
      metric: 'error_rate',
      value: null,
      threshold: maxErrorRate * 100,
      passed: false,
      reason: `error rate of ${candidate} unknown (scores written before error rates were recorded); rerun the eval stage`,
    });
  if (evidence.simulated !== undefined)
    checks.push({
      rule: 'allowSimulated',
      metric: 'simulated',
      value: null,
      threshold: null,
      passed: evidence.allowSimulated === true,
      reason: `${candidate} is not a real model (${evidence.simulated})${evidence.allowSimulated ? '; allowSimulated: true' : '; set allowSimulated: true in the gate config to gate it anyway'}`,
    });
  return checks;
}

/**
 * Applies the rules to the metrics of every label (scores.json `scores.<label>.metrics`) and the
 * paired comparisons, then the guards (error rate, simulated). Pure. A metric missing for the
 * candidate, a reference label that is not evaluated, or a missing comparison fails its rule (a
 * gate must not promote on numbers it does not have). Without `evidence` the guards are not
 * applied (a caller that has no scores.json beyond the metrics).
 */
export function evaluateGate(
  rules: readonly string[],
  candidate: string,
  metrics: Record<string, Record<string, number>>,
  evidence?: GateEvidence,
): GateDecision {
  const checks: GateCheck[] = rules.map((text) => {
    const alternatives = parseGateRuleAlternatives(text);
    if ('error' in alternatives)
      return { rule: text, metric: '', value: null, threshold: null, passed: false, reason: alternatives.error };
    const judged = alternatives.map((rule) => judgeRule(rule, candidate, metrics, evidence ?? {}));
    if (judged.length === 1) return { rule: text, ...judged[0] };
    const passing = judged.find((check) => check.passed);
    return {
      rule: text,
      ...(passing ?? judged[0]),
      passed: passing !== undefined,
      reason: passing ? passing.reason : `none of: ${judged.map((check) => check.reason).join('; ')}`,
    };
  });
  if (evidence) checks.push(...guardChecks(candidate, evidence));
  const failed = checks.filter((check) => !check.passed);
  return {
    decision: failed.length === 0 ? 'promote' : 'hold',
    candidate,
    checks,
    reasons: (failed.length > 0 ? failed : checks).map((check) => check.reason),
  };
}

/** The `gate` stage config planning adds for a run's `gate:` section (references resolved by the planner like any stage's). */
export function gateStageConfig(gate: GateConfig): Record<string, unknown> {
  return {
    scores: `\${stages.${gate.eval}.manifestUri}`,
    candidate: gate.candidate,
    rules: gate.rules,
    promote: gate.promote,
    maxErrorRate: gate.maxErrorRate,
    allowSimulated: gate.allowSimulated,
    pointerRoot: '${run.artifacts}',
    holds: gate.before,
  };
}

export const GATE_DECISION_SCHEMA_VERSION = 1;

/** `runs/<runId>/gate/decision.json`: what the gate decided, why, and what it did to the pointer. */
export interface GateDecisionRecord extends GateDecision {
  schemaVersion: number;
  runId: string;
  scoresUri: string;
  /** The candidate as the pointer would name it. */
  checkpoint: { endpoint: string; model: string };
  /** The pointer before this decision (absent: none promoted yet). */
  previous?: { endpoint: string; model: string; runId?: string; promotedAt: string };
  /** True when this decision moved the pointer. */
  promoted: boolean;
  pointerUri?: string;
  /** Tonight's candidate against the promoted checkpoint's stored item outcomes (when the pointer names its scores). */
  nightToNight?: NightToNight;
}

/** The candidate paired item by item with the results the promoted checkpoint was promoted on. */
export interface NightToNight {
  /** The promoted checkpoint's scores (the pointer's scoresUri) and the label it was scored under. */
  promotedScoresUri?: string;
  promotedRunId?: string;
  promotedLabel?: string;
  /** Per suite: candidate tonight − promoted then, paired-bootstrap 95% interval. */
  suites: Array<{ suite: string; difference: { score: number; low: number; high: number; items: number } }>;
  /** Items that passed then and fail tonight, and the reverse. */
  lost: number;
  gained: number;
  /** Why there is no comparison (absent when there is one). */
  unavailable?: string;
}

/** File name of the decision inside the gate stage's output. */
export const gateDecisionObject = 'decision.json';
