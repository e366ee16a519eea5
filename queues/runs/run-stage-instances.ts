import type { PathSegment } from '../../shared/harness/source-document';
import {
  checkpointsNamedIn,
  handoffConfigSchema,
  handoffStageName,
  namedHandoffConfigSchema,
  runNodeNamePattern,
  type NamedHandoffConfig,
} from './run-handoff';

/**
 * The stages and handoffs of a run config as the planner sees them: stage instances with their
 * kind, the single `handoff:` turned into a handoff named `train`, and every on-policy stage with
 * `rounds: N` unrolled into N stage instances with a trainer handoff between consecutive rounds.
 *
 * ```yaml
 * handoffs:
 *   sft: { after: [sft_data] }
 *   opd: { after: [opd] }              # gets the last round's samples
 * stages:
 *   sft_data: { stage: shard, ... }
 *   opd:
 *     stage: distill
 *     rounds: 2                        # opd-round-1 (version 1) -> handoff opd-round-1 -> opd-round-2 (version 2) -> handoff opd
 *     student: { adapter: onnx, modelDir: "${checkpoints.sft.modelDir}" }
 * ```
 * Round k+1 reads the checkpoint of handoff `<handoff>-round-k` where round 1 read the starting
 * checkpoint; its records carry `policyVersion: k+1`. Other stages' `${stages.opd.*}` read the last
 * round. Pure: the result is a config the planner validates like any other.
 *
 * `maxStaleness: s` (0 to N-1, default 0) lets round k+1 start as soon as version k+1-s is
 * registered instead of waiting for version k+1: it samples from that version (the newest one
 * when it starts, since the handoffs follow one another) and its records say so. The handoff
 * after round k+1 then waits for the handoff before it (`follows`) as well as for its round, and
 * drops (and counts) any dataset whose records are older than the version being trained from
 * minus s (`maxStaleness` on the handoff; workers/run/handoff-processor.ts).
 */

/** Stage kinds that sample from the policy being trained, so they can run in rounds. */
export const onPolicyStageKinds: ReadonlySet<string> = new Set(['distill', 'rl']);

/** One stage instance of a run. */
export interface StageInstance {
  name: string;
  /** The registered stage it runs (its queue). */
  kind: string;
  /** The stage config, without the run-level keys (`stage`, `rounds`, `maxStaleness`). */
  config: Record<string, unknown>;
  /** Where it is in the config file (a round points at the stage it was unrolled from). */
  path: PathSegment[];
  /** For a round of an on-policy stage (`maxStaleness` as configured, default 0). */
  round?: { index: number; of: number; stage: string; maxStaleness?: number };
}

/** One trainer handoff of a run. */
export interface HandoffInstance {
  name: string;
  config: NamedHandoffConfig;
  path: PathSegment[];
  /** The policy version its checkpoint is (handoffs after a round of an on-policy stage). */
  policyVersion?: number;
  /** A handoff it waits for besides its `after` stages (a round handoff whose round started early, maxStaleness > 0). */
  follows?: string;
  /** Datasets older than the version trained from minus this are dropped from its request (rounds with maxStaleness). */
  maxStaleness?: number;
}

export interface RunInstances {
  stages: StageInstance[];
  handoffs: HandoffInstance[];
  problems: Array<{ path: PathSegment[]; message: string }>;
}

const runLevelKeys = ['stage', 'rounds', 'maxStaleness'];

/** Reads `stages`, `handoff` and `handoffs` of a parsed run config (their shapes checked by the run schema). */
export function runInstances(config: {
  stages: Record<string, Record<string, unknown> | null | undefined>;
  handoff?: unknown;
  handoffs?: unknown;
}): RunInstances {
  const problems: RunInstances['problems'] = [];
  const handoffs: HandoffInstance[] = [];
  if (config.handoff !== undefined && config.handoffs !== undefined) {
    problems.push({
      path: ['handoff'],
      message: 'give either handoff: (one trainer handoff, named train) or handoffs: { <name>: {...} }, not both',
    });
  }
  const legacy = config.handoff !== undefined ? handoffConfigSchema.parse(config.handoff) : undefined;
  if (legacy) handoffs.push({ name: handoffStageName, config: { ...legacy, base: 'previous' }, path: ['handoff'] });
  for (const [name, value] of Object.entries((config.handoffs ?? {}) as Record<string, unknown>)) {
    if (!runNodeNamePattern.test(name))
      problems.push({
        path: ['handoffs', name],
        message: `handoff name "${name}" is not allowed: use letters, digits, "_" and "-" (at most 64)`,
      });
    const parsed = namedHandoffConfigSchema.parse(value);
    handoffs.push({
      name,
      config: parsed,
      path: ['handoffs', name],
      ...(parsed.follows !== undefined ? { follows: parsed.follows } : {}),
    });
  }

  let stages: StageInstance[] = [];
  for (const [name, entry] of Object.entries(config.stages)) {
    const value = { ...(entry ?? {}) };
    if (!runNodeNamePattern.test(name))
      problems.push({
        path: ['stages', name],
        message: `stage name "${name}" is not allowed: use letters, digits, "_" and "-" (at most 64)`,
      });
    const kind = value.stage === undefined ? name : value.stage;
    if (typeof kind !== 'string' || kind.length === 0) {
      problems.push({
        path: ['stages', name, 'stage'],
        message: 'must name a registered stage kind (shard, distill, rl, ...)',
      });
      continue;
    }
    const onPolicy = onPolicyStageKinds.has(kind);
    const rounds = onPolicy ? value.rounds : undefined;
    const maxStaleness = onPolicy ? value.maxStaleness : undefined;
    for (const key of runLevelKeys) if (key === 'stage' || onPolicy) delete value[key];
    if (rounds !== undefined && !(Number.isInteger(rounds) && (rounds as number) >= 1 && (rounds as number) <= 100)) {
      problems.push({ path: ['stages', name, 'rounds'], message: 'must be a whole number of rounds from 1 to 100' });
    }
    const roundCount = typeof rounds === 'number' && Number.isInteger(rounds) && rounds >= 1 ? rounds : 1;
    if (
      maxStaleness !== undefined &&
      !(Number.isInteger(maxStaleness) && (maxStaleness as number) >= 0 && (maxStaleness as number) <= roundCount - 1)
    ) {
      problems.push({
        path: ['stages', name, 'maxStaleness'],
        message: `must be a whole number from 0 to rounds - 1 (${roundCount - 1} here): how many policy versions a round may sample behind the newest (0: each round waits for the checkpoint of the round before it); got ${JSON.stringify(maxStaleness)}`,
      });
    }
    const staleness =
      typeof maxStaleness === 'number' && Number.isInteger(maxStaleness) && maxStaleness > 0 ? { maxStaleness } : {};
    stages.push({
      name,
      kind,
      config: value,
      path: ['stages', name],
      ...(typeof rounds === 'number' && rounds >= 2
        ? { round: { index: 0, of: rounds, stage: name, ...staleness } }
        : {}),
    });
  }

  // Legacy `${checkpoint.<field>}` is the single handoff's checkpoint.
  if (legacy)
    stages = stages.map((stage) => ({
      ...stage,
      config: rewriteStrings(stage.config, (text) =>
        text.replace(/\$\{\s*checkpoint\.([A-Za-z]+)\s*\}/g, `\${checkpoints.${handoffStageName}.$1}`),
      ) as Record<string, unknown>,
    }));

  for (const roundedName of stages.filter((stage) => stage.round !== undefined).map((stage) => stage.name)) {
    const rounded = stages.find((stage) => stage.name === roundedName) as StageInstance;
    const unrolled = unrollRounds(rounded, handoffs, problems);
    if (!unrolled) continue;
    const last = unrolled.stages[unrolled.stages.length - 1];
    const renameStage = (name: string) => (name === rounded.name ? last.name : name);
    stages = stages.flatMap((stage) => (stage.name === rounded.name ? unrolled.stages : [stage]));
    stages = stages.map((stage) => ({
      ...stage,
      config: rewriteStrings(stage.config, (text) =>
        text.replace(new RegExp(`\\$\\{\\s*stages\\.${escapeRegExp(rounded.name)}\\.`, 'g'), `\${stages.${last.name}.`),
      ) as Record<string, unknown>,
    }));
    const renamed = handoffs.map((handoff) => ({
      ...handoff,
      config: {
        ...handoff.config,
        after: handoff.config.after.map(renameStage),
        before: handoff.config.before.map(renameStage),
      },
    }));
    const at = renamed.findIndex((handoff) => handoff.name === unrolled.handoff);
    renamed.splice(
      at,
      1,
      ...unrolled.handoffs.map((handoff) =>
        handoff.name === unrolled.handoff ? { ...handoff, config: { ...renamed[at].config } } : handoff,
      ),
    );
    handoffs.splice(0, handoffs.length, ...renamed);
  }
  for (const stage of stages) if (stage.round && stage.round.index === 0) delete stage.round;
  return { stages, handoffs, problems };
}

/** Round k of `stage` for k = 1..N, and the handoffs between them (the last is the stage's own handoff, version N+1). */
function unrollRounds(
  stage: StageInstance,
  handoffs: HandoffInstance[],
  problems: RunInstances['problems'],
): { stages: StageInstance[]; handoffs: HandoffInstance[]; handoff: string } | undefined {
  const { of: rounds, maxStaleness = 0 } = stage.round as NonNullable<StageInstance['round']>;
  const owners = handoffs.filter((handoff) => handoff.config.after.includes(stage.name));
  if (owners.length !== 1) {
    problems.push({
      path: [...stage.path, 'rounds'],
      message: `each round hands its samples to the trainer: name "${stage.name}" in the after list of exactly one handoff (found ${owners.length})`,
    });
    return undefined;
  }
  const owner = owners[0];
  const starts = [...checkpointsNamedIn(stage.config)];
  if (starts.length !== 1) {
    problems.push({
      path: [...stage.path, 'rounds'],
      message: `round k+1 samples from the checkpoint trained on round k, so "${stage.name}" must take its policy from one handoff's checkpoint (\${checkpoints.<handoff>.<field>}); it names ${starts.length === 0 ? 'none' : starts.join(', ')}`,
    });
    return undefined;
  }
  const start = starts[0];
  const roundHandoff = (index: number) => (index === rounds ? owner.name : `${owner.name}-round-${index}`);
  const stages: StageInstance[] = [];
  const between: HandoffInstance[] = [];
  for (let index = 1; index <= rounds; index++) {
    const name = `${stage.name}-round-${index}`;
    // Round k samples version k, or with maxStaleness s the version k-s it may start on (at least 1).
    const version = Math.max(1, index - maxStaleness);
    const source = version === 1 ? start : roundHandoff(version - 1);
    const config = rewriteStrings(stage.config, (text) =>
      text.replace(new RegExp(`\\$\\{\\s*checkpoints\\.${escapeRegExp(start)}\\.`, 'g'), `\${checkpoints.${source}.`),
    ) as Record<string, unknown>;
    stages.push({
      name,
      kind: stage.kind,
      config: { ...config, policyVersion: version },
      path: stage.path,
      round: { index, of: rounds, stage: stage.name, ...(maxStaleness > 0 ? { maxStaleness } : {}) },
    });
    // The first round's training continues from the configured base; later rounds from the round before.
    const roundBase = index === 1 ? owner.config.base : 'previous';
    const handoffConfig =
      index === rounds
        ? { ...owner.config, base: roundBase }
        : { ...owner.config, after: [name], before: [], base: roundBase };
    between.push({
      name: roundHandoff(index),
      config:
        index === rounds
          ? { ...handoffConfig, after: handoffConfig.after.map((item) => (item === stage.name ? name : item)) }
          : handoffConfig,
      path: owner.path,
      policyVersion: index + 1,
      ...(maxStaleness > 0 ? { maxStaleness, ...(index > 1 ? { follows: roundHandoff(index - 1) } : {}) } : {}),
      ...(index === 1 && owner.follows !== undefined ? { follows: owner.follows } : {}),
    });
  }
  return { stages, handoffs: between, handoff: owner.name };
}

function rewriteStrings(value: unknown, rewrite: (text: string) => string): unknown {
  if (typeof value === 'string') return rewrite(value);
  if (Array.isArray(value)) return value.map((item) => rewriteStrings(item, rewrite));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, rewriteStrings(item, rewrite)]));
  return value;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
