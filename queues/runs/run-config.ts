import { readFile } from 'node:fs/promises';
import { z, type ZodError } from 'zod';
import type { HatEnv } from '../../shared/config/env';
import { findUrlCredentials } from '../../shared/config/url-credentials';
import { decodeUtf8Strict } from '../../shared/artifacts/utf8';
import { BadInputError, ProblemCollector, type Problem } from '../../shared/errors';
import { SourceDocument, formatPath, type PathSegment } from '../../shared/harness/source-document';
import { hashValue } from '../../shared/hash/hash';
import { deriveRunId, runIdPattern, stageJobId } from '../stage-kit/job-ids';
import { normalizeArtifactsRoot, runLayout } from './run-layout';
import { stagePrefix } from '../../shared/artifacts/artifact-layout';
import { findStage, stageNames } from '../stage-kit/stage-registry';
import { isLatestSpecValue, findLatestSpecs, latestPlaceholder, type ResolvedInput } from './latest-inputs';
import {
  checkpointFields,
  checkpointReferencePattern,
  fillCheckpointPlaceholders,
  handoffConfigSchema,
  handoffJobId,
  handoffNodeName,
  namedHandoffConfigSchema,
  type PlannedHandoff,
} from './run-handoff';
import { runInstances, type StageInstance } from './run-stage-instances';
import { gateConfigSchema, gateStageConfig, gateStageName } from './run-gate';

/**
 * The run config (YAML) and the plan made from it. Planning is pure and validates the whole run
 * before anything is enqueued: unknown stages, bad references, cycles and every stage config
 * against its stage's input schema, all reported in one pass with their paths (and lines).
 *
 * ```yaml
 * runId: nightly-2025-01-31      # optional; default run-<UTC time>-<config hash>
 * artifacts: s3://bucket/hat     # optional; default HAT_ARTIFACTS
 * seed: 7                        # optional; default "0"
 * stages:
 *   fanout-demo: { parts: 50 }
 *   noop:
 *     inputs: ["${stages.fanout-demo.manifestUri}"]   # runs after fanout-demo
 * ```
 * A stage entry may name its kind (`sft_data: { stage: shard, ... }`; default: the entry's name),
 * so a run can hold several stages of one kind; on-policy kinds may run `rounds: N`
 * (queues/runs/run-stage-instances.ts). References: `${stages.<name>.manifestUri}` (the stage's
 * `manifest.json`), `${stages.<name>.outputUri}` (its output folder), `${run.id}`, `${run.seed}`,
 * `${run.artifacts}`, and `${checkpoints.<handoff>.<field>}` (endpoint, model, modelDir,
 * checkpointUri, policyVersion) of a trainer handoff, in any field: the stage then waits for that
 * checkpoint (queues/runs/run-handoff.ts; `${checkpoint.<field>}` with a single `handoff:`). A stage
 * that references another runs after it. A value may also be a
 * `latest` input (`{ latest: s3://..., partition: dt=YYYY-MM-DD }`, `{ latestHarness: s3://... }`,
 * queues/runs/latest-inputs.ts), resolved when the run is created and passed in as `resolvedInputs`.
 */

const artifactsUri = z.string().regex(/^(s3|file):\/\/.+/, 'must be an s3://bucket/prefix or file:///absolute/path URI');

export const runConfigSchema = z
  .object({
    /** Run id; default `run-<UTC time>-<first 8 hex of the config hash>`. */
    runId: z.string().regex(runIdPattern, 'use letters, digits, ".", "_" and "-" (at most 100, not only digits)').optional(),
    /** Root of the run's artifact store; default HAT_ARTIFACTS. */
    artifacts: artifactsUri.optional(),
    /** Seed of every random choice of the run. Default "0". */
    seed: z.union([z.string().min(1), z.number().int()]).transform(String).default('0'),
    /** Stages to run, by name, each with its config (validated by the stage's input schema). */
    stages: z
      .record(z.string(), z.record(z.string(), z.unknown()).nullish())
      .refine((stages) => Object.keys(stages).length > 0, 'name at least one stage'),
    /** A trainer handoff between stages, named `train` (queues/runs/run-handoff.ts). Default: none. */
    handoff: handoffConfigSchema.optional(),
    /** Several trainer handoffs by name; they form a chain (each after a stage that waits for the one before). */
    handoffs: z.record(z.string(), namedHandoffConfigSchema).optional(),
    /** A promotion gate after an eval stage (queues/runs/run-gate.ts). Default: none. */
    gate: gateConfigSchema.optional(),
  })
  .strict();
export type RunConfig = z.infer<typeof runConfigSchema>;

/** One stage of a planned run. */
export interface PlannedStage {
  name: string;
  /** The registered stage it runs (its queue); the name unless the config says `stage: <kind>`. */
  kind: string;
  /** The stage config with references resolved and defaults applied (the job's input). */
  input: unknown;
  inputHash: string;
  jobId: string;
  /** `runs/<runId>/<stage>/`. */
  outputPrefix: string;
  /** Stages it references (it runs after them). */
  dependsOn: string[];
  /** Held back by a trainer handoff until a checkpoint is registered. */
  afterHandoff?: true;
  /** The handoff that adds it once its checkpoint is registered (the last one it waits for). */
  segment?: string;
  /**
   * For a stage held back by a handoff: its config with every reference resolved but
   * `${checkpoints.*}` (`input` was validated with placeholders in their place).
   */
  template?: unknown;
  /** For a round of an on-policy stage: which round, and the policy version it samples with. */
  round?: { index: number; of: number; stage: string; policyVersion: number };
}

/** A validated run, ready to become a flow. */
export interface RunPlan {
  runId: string;
  /** Hash of the config content (seed, artifacts, stages); equal configs give equal hashes. */
  configHash: string;
  artifactsRoot: string;
  seed: string;
  /** Epoch ms. */
  createdAt: number;
  source: string;
  /** In config order. */
  stages: PlannedStage[];
  /** The trainer handoffs in chain order (empty without any). */
  handoffs: PlannedHandoff[];
  /** What the config's `latest` inputs resolved to (absent when it has none). */
  resolvedInputs?: ResolvedInput[];
}

/** Turns paths into problems; SourceDocument does it with line numbers. */
export interface ProblemLocator {
  problem(path: readonly PathSegment[], message: string): Problem;
  zodProblems(error: ZodError, prefix?: readonly PathSegment[]): Problem[];
}

/** A locator for a config that did not come from a file we can point into (scheduled kickoffs). */
export function plainLocator(file?: string): ProblemLocator {
  const problem = (path: readonly PathSegment[], message: string): Problem => ({ file, path: path.length > 0 ? formatPath(path) : undefined, message });
  return {
    problem,
    zodProblems: (error, prefix = []) => error.issues.map((issue) => problem([...prefix, ...(issue.path as PathSegment[])], issue.message)),
  };
}

/** A run config file: its parsed value and a locator that knows its lines. */
export interface RunConfigSource {
  file: string;
  value: unknown;
  locator: ProblemLocator;
}

/** Reads and parses a YAML config file; BadInputError for a missing file or bad YAML. */
export async function readConfigFile(file: string, what = 'run config'): Promise<RunConfigSource> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new BadInputError('CONFIG_NOT_FOUND', `cannot read ${what} ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); check the path`);
  }
  const text = decodeUtf8Strict(bytes, file);
  const document = new SourceDocument(file, text, 'yaml');
  const problems = new ProblemCollector();
  problems.addAll(document.syntaxProblems);
  problems.throwIfAny('BAD_CONFIG_YAML', `${file} is not valid YAML`);
  return { file, value: document.value, locator: document };
}

export interface PlanRunOptions {
  env: Pick<HatEnv, 'HAT_ARTIFACTS'>;
  /** Time the run is created (and derived run ids are stamped with). */
  now: Date;
  /** Overrides the config's runId (scheduled runs derive theirs from the firing time). */
  runId?: string;
  /** Overrides the config's artifacts URI (`--artifacts`). */
  artifacts?: string;
  /** Recorded in the run job (`cli`, `schedule:<name>`, `demo`). Default `cli`. */
  source?: string;
  file?: string;
  locator?: ProblemLocator;
  /**
   * What the config's `latest` inputs resolved to (resolveLatestInputs). A spec without a
   * resolution is planned with a placeholder (`hat schedule set` validates the config that way).
   */
  resolvedInputs?: ResolvedInput[];
}

const referencePattern = /\$\{([^}]*)\}/g;
const stageReferencePattern = /^stages\.([A-Za-z0-9_-]+)\.(manifestUri|outputUri)$/;
const runReferencePattern = /^run\.(id|seed|artifacts)$/;

/** Validates a run config and plans the run; throws one ValidationError listing every problem. */
export function planRun(value: unknown, options: PlanRunOptions): RunPlan {
  const file = options.file;
  const locator = options.locator ?? plainLocator(file);
  const problems = new ProblemCollector();
  const summary = `${file ?? 'the run config'} has problems; fix them and run again`;
  for (const found of findUrlCredentials(value)) problems.add(locator.problem(found.path, found.message));
  const parsed = runConfigSchema.safeParse(value ?? {});
  if (!parsed.success) problems.addAll(locator.zodProblems(parsed.error));
  if (!parsed.success || !problems.ok) problems.throwIfAny('BAD_RUN_CONFIG', summary);
  const config = parsed.data as RunConfig;
  const instances = runInstances(config);
  for (const problem of instances.problems) problems.add(locator.problem(problem.path, problem.message));
  const stageConfigs: StageInstance[] = instances.stages;
  // The gate is planned as a stage of its own (it reads the eval stage's manifest like any stage).
  if (config.gate) {
    if (config.stages[gateStageName] !== undefined) problems.add(locator.problem(['stages', gateStageName], `"${gateStageName}" is the name of the stage a gate: section adds; rename this stage`));
    else {
      const after = stageConfigs.findIndex((stage) => stage.name === config.gate?.eval);
      const gateInstance: StageInstance = { name: gateStageName, kind: gateStageName, config: gateStageConfig(config.gate), path: ['gate'] };
      stageConfigs.splice(after < 0 ? stageConfigs.length : after + 1, 0, gateInstance);
    }
  }

  const rootSetting = options.artifacts ?? config.artifacts ?? options.env.HAT_ARTIFACTS;
  const artifactsRoot = rootSetting && artifactsUri.safeParse(rootSetting).success ? normalizeArtifactsRoot(rootSetting) : undefined;
  if (!rootSetting) {
    problems.add(locator.problem(['artifacts'], 'no artifact store: set `artifacts:` in the config (s3://bucket/prefix or file:///dir), pass --artifacts, or set HAT_ARTIFACTS'));
  } else if (!artifactsRoot) {
    problems.add({ path: options.artifacts ? '--artifacts' : 'HAT_ARTIFACTS', message: `"${rootSetting}" must be an s3://bucket/prefix or file:///absolute/path URI` });
  } else if (hasDotSegment(rootSetting)) {
    problems.add(locator.problem(['artifacts'], `"${rootSetting}" has a "." or ".." segment; give the artifact root as a plain s3://bucket/prefix or file:///absolute/path`));
  }
  for (const stage of stageConfigs) {
    if (findStage(stage.kind)) continue;
    const where = stage.kind === stage.name ? stage.path : [...stage.path, 'stage'];
    problems.add(locator.problem(where, `unknown stage ${stage.kind === stage.name ? '' : 'kind '}"${stage.kind}"; registered stages: ${stageNames().join(', ')}`));
  }

  if (options.runId !== undefined && !runIdPattern.test(options.runId)) {
    problems.add({ path: 'runId', message: `run id "${options.runId}" is not allowed: use letters, digits, ".", "_" and "-" (at most 100, not only digits)` });
    problems.throwIfAny('BAD_RUN_CONFIG', summary);
  }
  // Over the config as written: `latest` specs, not what they resolved to, so a retried scheduled
  // kickoff that resolves a newer partition still finds (and leaves alone) the run it started.
  const configHash = hashValue({ seed: config.seed, artifacts: artifactsRoot, stages: config.stages, handoff: config.handoff, handoffs: config.handoffs, ...(config.gate ? { gate: config.gate } : {}) });
  const runId = options.runId ?? config.runId ?? deriveRunId(configHash, options.now);
  const names = new Set(stageConfigs.map((stage) => stage.name));
  const handoffs = instances.handoffs;
  const handoffNames = new Set(handoffs.map((handoff) => handoff.name));
  if (config.gate) {
    const gate = config.gate;
    if (!names.has(gate.eval)) problems.add(locator.problem(['gate', 'eval'], `stage "${gate.eval}" is not in this run; name the eval stage listed under stages`));
    gate.before.forEach((name, index) => {
      if (!names.has(name) || name === gateStageName) problems.add(locator.problem(['gate', 'before', index], `stage "${name}" is not in this run; name a stage listed under stages`));
      else if (name === gate.eval) problems.add(locator.problem(['gate', 'before', index], `stage "${name}" is the eval the gate reads; it cannot also wait for the gate`));
    });
  }
  // Direct edges: a stage -> the stages it reads and the handoffs whose checkpoint it waits for; a handoff -> its `after` stages.
  const dependsOn = new Map<string, Set<string>>();
  const waitsFor = new Map<string, Set<string>>(stageConfigs.map((stage) => [stage.name, new Set<string>()]));
  for (const handoff of handoffs) {
    for (const field of ['after', 'before'] as const) {
      handoff.config[field].forEach((name, index) => {
        if (!names.has(name)) problems.add(locator.problem([...handoff.path, field, index], `stage "${name}" is not in this run; name a stage listed under stages`));
        else if (field === 'before') waitsFor.get(name)?.add(handoff.name);
      });
    }
    handoff.config.before.forEach((name, index) => {
      if (handoff.config.after.includes(name)) problems.add(locator.problem([...handoff.path, 'before', index], `stage "${name}" is in both after and before; a stage runs either before the training or after it`));
    });
  }
  const latest = findLatestSpecs(config.stages);
  for (const problem of latest.problems) problems.add(locator.problem(problem.path, problem.message));
  const resolvedByPath = new Map((options.resolvedInputs ?? []).map((input) => [input.path, input.resolved]));
  const resolveLatest = (value: Record<string, unknown>, path: PathSegment[]): unknown => {
    const found = latest.specs.find((spec) => formatPath(spec.path) === formatPath(path));
    if (!found) return value;
    return resolvedByPath.get(formatPath(path)) ?? latestPlaceholder(found.spec);
  };
  const resolve = (stage: string, reference: string, path: PathSegment[]): string | undefined => {
    const checkpointMatch = checkpointReferencePattern.exec(reference);
    if (checkpointMatch) {
      const [, handoff, field] = checkpointMatch as unknown as [string, string | undefined, string];
      if (!(checkpointFields as readonly string[]).includes(field)) {
        problems.add(locator.problem(path, `unknown reference \${${reference}}; a checkpoint offers ${checkpointFields.join(', ')}`));
      } else if (handoff === undefined) {
        problems.add(locator.problem(path, `\${${reference}} needs a trainer handoff: add handoff: { after: [...], before: [${stage}] } to the run config (or handoffs: { <name>: ... } and \${checkpoints.<name>.${field}})`));
      } else if (!handoffNames.has(handoff)) {
        problems.add(locator.problem(path, `\${${reference}} names handoff "${handoff}", which this run does not have; handoffs: ${[...handoffNames].join(', ') || 'none (add handoffs: { <name>: { after: [...] } })'}`));
      } else {
        waitsFor.get(stage)?.add(handoff);
      }
      // Kept as written: filled in when the checkpoint is registered.
      return `\${${reference}}`;
    }
    const stageMatch = stageReferencePattern.exec(reference);
    if (stageMatch) {
      const [, target, field] = stageMatch as unknown as [string, string, 'manifestUri' | 'outputUri'];
      if (!names.has(target)) {
        problems.add(locator.problem(path, `\${${reference}} refers to stage "${target}", which this run does not include; add it under stages`));
        return undefined;
      }
      if (target === stage) {
        problems.add(locator.problem(path, `\${${reference}}: a stage cannot read its own output`));
        return undefined;
      }
      dependsOn.get(stage)?.add(target);
      if (!artifactsRoot) return undefined;
      const layout = runLayout(artifactsRoot, runId);
      return field === 'manifestUri' ? layout.stageManifestUri(target) : layout.stageOutputUri(target);
    }
    const runMatch = runReferencePattern.exec(reference);
    if (runMatch) return runMatch[1] === 'id' ? runId : runMatch[1] === 'seed' ? config.seed : artifactsRoot;
    problems.add(
      locator.problem(
        path,
        `unknown reference \${${reference}}; use \${stages.<name>.manifestUri}, \${stages.<name>.outputUri}, \${run.id}, \${run.seed}, \${run.artifacts}` +
          ' or \${checkpoints.<handoff>.<field>}',
      ),
    );
    return undefined;
  };

  const resolved = stageConfigs.map((instance) => {
    dependsOn.set(instance.name, new Set());
    const value = substitute(instance.config, instance.path, (reference, path) => resolve(instance.name, reference, path), resolveLatest) as Record<string, unknown>;
    for (const problem of outputEscapes(value, instance.path)) problems.add(locator.problem(problem.path, problem.message));
    // Reported above; the stage schema need not call them unknown keys as well.
    return { instance, value: Object.fromEntries(Object.entries(value).filter(([key]) => !outputKeys.has(key))) };
  });
  // Stages the gate holds back read its decision: they run after it, and not at all on a hold.
  for (const name of config.gate?.before ?? []) if (name !== config.gate?.eval) dependsOn.get(name)?.add(gateStageName);
  // Handoffs are `handoff:<name>` in the graph: a handoff may share its name with a stage.
  const node = handoffNodeName;
  const isHandoffNode = (name: string) => name.startsWith(node(''));
  const graph = new Map<string, Set<string>>([...dependsOn].map(([name, targets]) => [name, new Set([...targets, ...[...(waitsFor.get(name) ?? [])].map(node)])]));
  for (const handoff of handoffs) graph.set(node(handoff.name), new Set(handoff.config.after.filter((name) => names.has(name))));
  const cycles = findCycles(graph);
  for (const cycle of cycles) {
    const first = cycle[0] as string;
    const path = isHandoffNode(first) ? (handoffs.find((handoff) => node(handoff.name) === first)?.path ?? []) : (stageConfigs.find((stage) => stage.name === first)?.path ?? ['stages', first]);
    const message = cycle.some(isHandoffNode)
      ? `stages and handoffs wait for each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages and checkpoints that come before it`
      : `stages reference each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages that run before it`;
    problems.add(locator.problem(path, message));
  }

  // Everything each node waits for, transitively (stages and handoffs).
  const ancestors = new Map<string, Set<string>>();
  const ancestorsOf = (name: string, seen = new Set<string>()): Set<string> => {
    const known = ancestors.get(name);
    if (known) return known;
    const found = new Set<string>();
    if (seen.has(name)) return found;
    seen.add(name);
    for (const next of graph.get(name) ?? []) {
      found.add(next);
      for (const item of ancestorsOf(next, seen)) found.add(item);
    }
    ancestors.set(name, found);
    return found;
  };
  // Handoffs form a chain: each waits (through its after stages) for the one before it.
  const handoffCount = (name: string) => [...ancestorsOf(node(name))].filter(isHandoffNode).length;
  const chain = cycles.length > 0 ? [] : [...handoffs].sort((left, right) => handoffCount(left.name) - handoffCount(right.name));
  for (let index = 1; index < chain.length; index++) {
    const previous = chain[index - 1] as (typeof handoffs)[number];
    const current = chain[index] as (typeof handoffs)[number];
    if (!ancestorsOf(node(current.name)).has(node(previous.name))) {
      problems.add(
        locator.problem(
          [...current.path, 'after'],
          `handoffs "${previous.name}" and "${current.name}" do not wait for each other; a run's handoffs follow one another (the method's order), so list a stage that waits for ${previous.name}'s checkpoint in ${current.name}'s after`,
        ),
      );
    }
  }
  const order = new Map(chain.map((handoff, index) => [handoff.name, index]));
  const segmentOf = (name: string): string | undefined => {
    let found: string | undefined;
    for (const item of ancestorsOf(name)) {
      const handoff = isHandoffNode(item) ? item.slice(node('').length) : undefined;
      if (handoff !== undefined && order.has(handoff) && (found === undefined || (order.get(handoff) as number) > (order.get(found) as number))) found = handoff;
    }
    return found;
  };
  if (problems.ok) {
    // A stage added by handoff H may read a stage added earlier only when H waited for it.
    const check = (name: string, path: PathSegment[], targets: Iterable<string>, what: string) => {
      const segment = segmentOf(name);
      if (segment === undefined) return;
      const owner = isHandoffNode(name) ? chain[(order.get(name.slice(node('').length)) as number) - 1]?.name : segment;
      if (owner === undefined) return;
      for (const target of targets) {
        if (!names.has(target) || segmentOf(target) === owner || ancestorsOf(node(owner)).has(target)) continue;
        problems.add(locator.problem(path, `${what} stage "${target}", which handoff ${owner} does not wait for; add "${target}" to ${owner === 'train' && config.handoff ? 'handoff' : `handoffs.${owner}`}.after`));
      }
    };
    for (const stage of stageConfigs) check(stage.name, stage.path, dependsOn.get(stage.name) ?? [], 'reads');
    for (const handoff of handoffs) if ((order.get(handoff.name) ?? 0) > 0) check(node(handoff.name), [...handoff.path, 'after'], handoff.config.after, 'waits for');
  }

  const stages: PlannedStage[] = [];
  for (const { instance, value: stageValue } of resolved) {
    const stage = findStage(instance.kind);
    if (!stage) continue;
    const segment = problems.ok ? segmentOf(instance.name) : undefined;
    const held = [...ancestorsOf(instance.name)].some(isHandoffNode);
    // A held-back stage is validated with placeholders for the checkpoint it will get.
    const result = stage.input.safeParse(held ? fillCheckpointPlaceholders(stageValue) : stageValue);
    if (!result.success) {
      problems.addAll(locator.zodProblems(result.error, instance.path));
      continue;
    }
    const inputHash = hashValue(result.data);
    const policyVersion = (stageValue as { policyVersion?: unknown }).policyVersion;
    stages.push({
      name: instance.name,
      kind: instance.kind,
      input: result.data,
      inputHash,
      jobId: stageJobId(runId, instance.name, inputHash),
      outputPrefix: stagePrefix(runId, instance.name),
      dependsOn: [...(dependsOn.get(instance.name) ?? [])],
      ...(held ? { afterHandoff: true as const, template: stageValue, ...(segment ? { segment } : {}) } : {}),
      ...(instance.round ? { round: { ...instance.round, policyVersion: typeof policyVersion === 'number' ? policyVersion : instance.round.index } } : {}),
    });
  }
  problems.throwIfAny('BAD_RUN_CONFIG', summary);
  const waiting = (handoff: string) => stageConfigs.filter((stage) => ancestorsOf(stage.name).has(node(handoff))).map((stage) => stage.name);
  return {
    runId,
    configHash,
    artifactsRoot: artifactsRoot as string,
    seed: config.seed,
    createdAt: options.now.getTime(),
    source: options.source ?? 'cli',
    stages,
    handoffs: chain.map((handoff, index) => ({
      name: handoff.name,
      jobId: handoffJobId(runId, handoff.name),
      after: handoff.config.after,
      before: waiting(handoff.name),
      timeoutMs: Math.round(handoff.config.timeoutMinutes * 60_000),
      pollIntervalMs: handoff.config.pollSeconds * 1_000,
      hyperparameters: handoff.config.hyperparameters,
      ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}),
      order: index,
    })),
    ...(options.resolvedInputs && options.resolvedInputs.length > 0 ? { resolvedInputs: options.resolvedInputs } : {}),
  };
}

/**
 * Replaces `${...}` in every string of a value (`resolve` returns undefined for a bad reference)
 * and every `latest` spec by what `resolveLatest` gives; a spec that stands for several URIs
 * inside a list is spliced into it.
 */
function substitute(
  value: unknown,
  path: PathSegment[],
  resolve: (reference: string, path: PathSegment[]) => string | undefined,
  resolveLatest: (spec: Record<string, unknown>, path: PathSegment[]) => unknown,
): unknown {
  if (typeof value === 'string') return value.replace(referencePattern, (whole, reference: string) => resolve(reference.trim(), path) ?? whole);
  if (isLatestSpecValue(value)) return resolveLatest(value, path);
  if (Array.isArray(value)) {
    return value.flatMap((item, index) => {
      const replaced = substitute(item, [...path, index], resolve, resolveLatest);
      return isLatestSpecValue(item) && Array.isArray(replaced) ? replaced : [replaced];
    });
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, [...path, key], resolve, resolveLatest)]));
  }
  return value;
}

/** Config keys that would choose where a stage writes; stages write under `runs/<runId>/<stage>/` of the run's store, always. */
const outputKeys = new Set(['out', 'output', 'outputPrefix', 'outputUri', 'outputKey']);

/** Whether a URI's path has `.` or `..` segments (`s3://b/runs/../x`, `file:///data/../etc`). */
function hasDotSegment(uri: string): boolean {
  const path = uri.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '');
  return path.split('/').some((segment) => segment === '.' || segment === '..' || segment === '%2e%2e' || segment === '%2E%2E');
}

/**
 * Values of a stage config that would put objects outside the run's prefix: an output location
 * (`out`, `outputPrefix`, ...) or an artifact URI that climbs with `..`. Object keys come only from
 * the run id and the stage name, both checked, so nothing a config says can escape the run.
 */
function outputEscapes(value: unknown, path: PathSegment[]): Array<{ path: PathSegment[]; message: string }> {
  const found: Array<{ path: PathSegment[]; message: string }> = [];
  const visit = (item: unknown, at: PathSegment[]) => {
    if (typeof item === 'string') {
      if (/^(s3|file):\/\//.test(item) && hasDotSegment(item)) found.push({ path: at, message: `"${item}" has a "." or ".." segment; object keys cannot climb out of their prefix, give the URI without them` });
      return;
    }
    if (Array.isArray(item)) return item.forEach((entry, index) => visit(entry, [...at, index]));
    if (item === null || typeof item !== 'object') return;
    for (const [key, entry] of Object.entries(item)) {
      if (at.length === path.length && outputKeys.has(key)) {
        found.push({ path: [...at, key], message: `a run decides where stages write (runs/<runId>/<stage>/ under the run's artifacts); remove "${key}" and set artifacts: to choose the store` });
      } else visit(entry, [...at, key]);
    }
  };
  visit(value, path);
  return found;
}

/** Every cycle of the dependency graph (each reported once, by its first stage in config order). */
function findCycles(dependsOn: Map<string, Set<string>>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (name: string) => {
    state.set(name, 'visiting');
    stack.push(name);
    for (const next of dependsOn.get(name) ?? []) {
      if (state.get(next) === 'visiting') cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(name, 'done');
  };
  for (const name of dependsOn.keys()) if (!state.has(name)) visit(name);
  return cycles;
}
