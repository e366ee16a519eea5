import { readFile } from 'node:fs/promises';
import { z, type ZodError } from 'zod';
import type { HatEnv } from '../shared/config/env';
import { findUrlCredentials } from '../shared/config/url-credentials';
import { decodeUtf8Strict } from '../shared/artifacts/utf8';
import { BadInputError, ProblemCollector, type Problem } from '../shared/errors';
import { SourceDocument, formatPath, type PathSegment } from '../shared/harness/source-document';
import { hashValue } from '../shared/hash/hash';
import { deriveRunId, runIdPattern, stageJobId } from './job-ids';
import { normalizeArtifactsRoot, runLayout } from './run-layout';
import { stagePrefix } from '../shared/artifacts/artifact-layout';
import { findStage, stageNames } from './stage-registry';
import { isLatestSpecValue, findLatestSpecs, latestPlaceholder, type ResolvedInput } from './latest-inputs';
import {
  checkpointFields,
  checkpointPlaceholders,
  checkpointReferencePattern,
  fillCheckpointReferences,
  handoffConfigSchema,
  handoffJobId,
  handoffStageName,
  type PlannedHandoff,
} from './run-handoff';

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
 * References: `${stages.<name>.manifestUri}` (the stage's `manifest.json`),
 * `${stages.<name>.outputUri}` (its output folder), `${run.id}`, `${run.seed}`, `${run.artifacts}`,
 * and in the stages a trainer handoff holds back, `${checkpoint.endpoint}` / `${checkpoint.model}`
 * (queues/run-handoff.ts). A stage that references another runs after it. A value may also be a
 * `latest` input (`{ latest: s3://..., partition: dt=YYYY-MM-DD }`, `{ latestHarness: s3://... }`,
 * queues/latest-inputs.ts), resolved when the run is created and passed in as `resolvedInputs`.
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
    /** A trainer handoff between stages (queues/run-handoff.ts). Default: none. */
    handoff: handoffConfigSchema.optional(),
  })
  .strict();
export type RunConfig = z.infer<typeof runConfigSchema>;

/** One stage of a planned run. */
export interface PlannedStage {
  name: string;
  /** The stage config with references resolved and defaults applied (the job's input). */
  input: unknown;
  inputHash: string;
  jobId: string;
  /** `runs/<runId>/<stage>/`. */
  outputPrefix: string;
  /** Stages it references (it runs after them). */
  dependsOn: string[];
  /** Held back by the trainer handoff until a checkpoint is registered. */
  afterHandoff?: true;
  /**
   * For a stage held back by the handoff: its config with every reference resolved but
   * `${checkpoint.*}` (`input` was validated with placeholders in their place).
   */
  template?: unknown;
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
  /** The trainer handoff, when the config has one. */
  handoff?: PlannedHandoff;
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
const stageReferencePattern = /^stages\.([a-z0-9-]+)\.(manifestUri|outputUri)$/;
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
  const stageConfigs = Object.entries(config.stages).map(([name, stageConfig]) => ({ name, config: stageConfig ?? {} }));

  const rootSetting = options.artifacts ?? config.artifacts ?? options.env.HAT_ARTIFACTS;
  const artifactsRoot = rootSetting && artifactsUri.safeParse(rootSetting).success ? normalizeArtifactsRoot(rootSetting) : undefined;
  if (!rootSetting) {
    problems.add(locator.problem(['artifacts'], 'no artifact store: set `artifacts:` in the config (s3://bucket/prefix or file:///dir), pass --artifacts, or set HAT_ARTIFACTS'));
  } else if (!artifactsRoot) {
    problems.add({ path: options.artifacts ? '--artifacts' : 'HAT_ARTIFACTS', message: `"${rootSetting}" must be an s3://bucket/prefix or file:///absolute/path URI` });
  } else if (hasDotSegment(rootSetting)) {
    problems.add(locator.problem(['artifacts'], `"${rootSetting}" has a "." or ".." segment; give the artifact root as a plain s3://bucket/prefix or file:///absolute/path`));
  }
  for (const { name } of stageConfigs) {
    if (!findStage(name)) problems.add(locator.problem(['stages', name], `unknown stage "${name}"; registered stages: ${stageNames().join(', ')}`));
  }

  if (options.runId !== undefined && !runIdPattern.test(options.runId)) {
    problems.add({ path: 'runId', message: `run id "${options.runId}" is not allowed: use letters, digits, ".", "_" and "-" (at most 100, not only digits)` });
    problems.throwIfAny('BAD_RUN_CONFIG', summary);
  }
  // Over the config as written: `latest` specs, not what they resolved to, so a retried scheduled
  // kickoff that resolves a newer partition still finds (and leaves alone) the run it started.
  const configHash = hashValue({ seed: config.seed, artifacts: artifactsRoot, stages: config.stages, handoff: config.handoff });
  const runId = options.runId ?? config.runId ?? deriveRunId(configHash, options.now);
  const names = new Set(stageConfigs.map((stage) => stage.name));
  const handoff = config.handoff;
  const heldBack = new Set(handoff?.before ?? []);
  if (handoff) {
    if (names.has(handoffStageName)) problems.add(locator.problem(['stages', handoffStageName], `"${handoffStageName}" is the trainer handoff's name; a run with a handoff cannot also have a stage of that name`));
    for (const field of ['after', 'before'] as const) {
      handoff[field].forEach((name, index) => {
        if (!names.has(name)) problems.add(locator.problem(['handoff', field, index], `stage "${name}" is not in this run; name a stage listed under stages`));
      });
    }
    handoff.before.forEach((name, index) => {
      if (handoff.after.includes(name)) problems.add(locator.problem(['handoff', 'before', index], `stage "${name}" is in both after and before; a stage runs either before the training or after it`));
    });
  }
  const dependsOn = new Map<string, Set<string>>();
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
      if (!(checkpointFields as readonly string[]).includes(checkpointMatch[1] as string)) {
        problems.add(locator.problem(path, `unknown reference \${${reference}}; the checkpoint offers ${checkpointFields.map((field) => `\${checkpoint.${field}}`).join(' and ')}`));
      } else if (!handoff) {
        problems.add(locator.problem(path, `\${${reference}} needs a trainer handoff: add handoff: { after: [...], before: [${stage}] } to the run config`));
      } else if (!heldBack.has(stage)) {
        problems.add(locator.problem(path, `\${${reference}}: stage "${stage}" does not wait for the checkpoint; add it to handoff.before`));
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
          ' (or \${checkpoint.endpoint} / \${checkpoint.model} in a stage held back by a trainer handoff)',
      ),
    );
    return undefined;
  };

  const resolved = stageConfigs.map(({ name, config: stageConfig }) => {
    dependsOn.set(name, new Set());
    const value = substitute(stageConfig, ['stages', name], (reference, path) => resolve(name, reference, path), resolveLatest) as Record<string, unknown>;
    for (const problem of outputEscapes(value, ['stages', name])) problems.add(locator.problem(problem.path, problem.message));
    // Reported above; the stage schema need not call them unknown keys as well.
    return { name, value: Object.fromEntries(Object.entries(value).filter(([key]) => !outputKeys.has(key))) };
  });
  for (const cycle of findCycles(dependsOn)) {
    problems.add(locator.problem(['stages', cycle[0] as string], `stages reference each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages that run before it`));
  }
  if (handoff) {
    // What the handoff waits for: the `after` stages and everything they read, transitively.
    const awaited = new Set<string>();
    const pending = [...handoff.after];
    while (pending.length > 0) {
      const name = pending.pop() as string;
      if (awaited.has(name)) continue;
      awaited.add(name);
      pending.push(...(dependsOn.get(name) ?? []));
    }
    for (const [name, targets] of dependsOn) {
      for (const target of targets) {
        if (!heldBack.has(name) && heldBack.has(target)) {
          problems.add(locator.problem(['stages', name], `reads stage "${target}", which waits for the checkpoint; add "${name}" to handoff.before too (or stop reading ${target})`));
        } else if (heldBack.has(name) && !heldBack.has(target) && !awaited.has(target)) {
          problems.add(locator.problem(['stages', name], `reads stage "${target}", which the handoff does not wait for; add "${target}" to handoff.after`));
        }
      }
    }
  }

  const stages: PlannedStage[] = [];
  for (const { name, value: stageValue } of resolved) {
    const stage = findStage(name);
    if (!stage) continue;
    const held = heldBack.has(name);
    // A held-back stage is validated with placeholders for the checkpoint it will get.
    const result = stage.input.safeParse(held ? fillCheckpointReferences(stageValue, checkpointPlaceholders) : stageValue);
    if (!result.success) {
      problems.addAll(locator.zodProblems(result.error, ['stages', name]));
      continue;
    }
    const inputHash = hashValue(result.data);
    stages.push({
      name,
      input: result.data,
      inputHash,
      jobId: stageJobId(runId, name, inputHash),
      outputPrefix: stagePrefix(runId, name),
      dependsOn: [...(dependsOn.get(name) ?? [])],
      ...(held ? { afterHandoff: true as const, template: stageValue } : {}),
    });
  }
  problems.throwIfAny('BAD_RUN_CONFIG', summary);
  return {
    runId,
    configHash,
    artifactsRoot: artifactsRoot as string,
    seed: config.seed,
    createdAt: options.now.getTime(),
    source: options.source ?? 'cli',
    stages,
    ...(handoff
      ? {
          handoff: {
            jobId: handoffJobId(runId),
            after: handoff.after,
            before: handoff.before,
            timeoutMs: Math.round(handoff.timeoutMinutes * 60_000),
            pollIntervalMs: handoff.pollSeconds * 1_000,
            hyperparameters: handoff.hyperparameters,
          },
        }
      : {}),
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
