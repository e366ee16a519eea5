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
 * offset, read as that model's value of the same metric. Planning adds a `gate` stage reading
 * `${stages.<eval>.manifestUri}`; the `before` stages read it, so they run after it, and a hold
 * keeps them from running: the gate job completes with the decision (a hold is not a failure) and
 * they complete at once without running; runs show the gate as held and them as not run.
 */

/** Name of the stage planning adds for a run's `gate:` section. */
export const gateStageName = 'gate';

export const gateOperators = ['>=', '>', '<=', '<'] as const;
export type GateOperator = (typeof gateOperators)[number];

/** One parsed rule. */
export interface GateRule {
  text: string;
  metric: string;
  operator: GateOperator;
  reference: { kind: 'number'; value: number } | { kind: 'model'; label: string; offset: number };
}

const rulePattern =
  /^\s*([a-z][a-z0-9_]*(?:\.[a-z0-9_-]+)*)\s*(>=|<=|>|<)\s*(?:(-?\d+(?:\.\d+)?)|([a-z][a-z0-9_-]*)\s*(?:([+-])\s*(\d+(?:\.\d+)?))?)\s*$/;

/** Parses a rule; a message saying how to write it when it does not parse. */
export function parseGateRule(text: string): GateRule | { error: string } {
  const match = rulePattern.exec(text);
  if (!match) {
    return {
      error: `"${text}" is not a gate rule; write <metric> <op> <number | label [+|- number]>, e.g. "live_stream_qa >= baseline - 0.5" or "ifeval.prompt_strict > 80"`,
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
          const parsed = parseGateRule(rule);
          if ('error' in parsed) context.addIssue({ code: 'custom', path: [index], message: parsed.error });
        });
      }),
    /** Stages that run only when the candidate is promoted (e.g. [replay]). Default none. */
    before: z.array(z.string().min(1)).default([]),
    /** Write the promoted-checkpoint pointer on a promotion. Default true (false: decide and record only). */
    promote: z.boolean().default(true),
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

/**
 * Applies the rules to the metrics of every label (scores.json `scores.<label>.metrics`). Pure.
 * A metric missing for the candidate, or a reference label that is not evaluated, fails its rule
 * (a gate must not promote on numbers it does not have).
 */
export function evaluateGate(
  rules: readonly string[],
  candidate: string,
  metrics: Record<string, Record<string, number>>,
): GateDecision {
  const checks: GateCheck[] = rules.map((text) => {
    const rule = parseGateRule(text);
    if ('error' in rule)
      return { rule: text, metric: '', value: null, threshold: null, passed: false, reason: rule.error };
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
        rule.reference.offset === 0
          ? ''
          : ` ${rule.reference.offset > 0 ? '+' : '-'} ${Math.abs(rule.reference.offset)}`;
      describe =
        base === undefined
          ? `${rule.reference.label}${offset}`
          : `${rule.reference.label} ${format(base)}${offset}${offset ? ` = ${format(threshold as number)}` : ''}`;
    }
    if (value === null)
      return {
        rule: text,
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
        rule: text,
        metric: rule.metric,
        value,
        threshold,
        passed: false,
        reason: `${rule.metric}: no ${label} score to compare with${known.includes(label) ? '' : ` (${label} is not an evaluated model; labels: ${known.join(', ')})`}`,
      };
    }
    const passed =
      rule.operator === '>='
        ? value >= threshold
        : rule.operator === '>'
          ? value > threshold
          : rule.operator === '<='
            ? value <= threshold
            : value < threshold;
    const shown = passed ? rule.operator : { '>=': '<', '>': '<=', '<=': '>', '<': '>=' }[rule.operator];
    return {
      rule: text,
      metric: rule.metric,
      value,
      threshold,
      passed,
      reason: `${rule.metric} ${format(value)} ${shown} ${describe}`,
    };
  });
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
}

/** File name of the decision inside the gate stage's output. */
export const gateDecisionObject = 'decision.json';
