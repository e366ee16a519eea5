import { readFile } from 'node:fs/promises';
import { z, type ZodError } from 'zod';
import type { HatEnv } from '../shared/config/env';
import { BadInputError, ProblemCollector, type Problem } from '../shared/errors';
import { SourceDocument, formatPath, type PathSegment } from '../shared/harness/source-document';
import { hashValue } from '../shared/hash/hash';
import { deriveRunId, runIdPattern, stageJobId } from './job-ids';
import { normalizeArtifactsRoot, runLayout } from './run-layout';
import { stagePrefix } from '../shared/artifacts/artifact-layout';
import { findStage, stageNames } from './stage-registry';

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
 * `${stages.<name>.outputUri}` (its output folder), `${run.id}`, `${run.seed}`, `${run.artifacts}`.
 * A stage that references another runs after it.
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
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new BadInputError('CONFIG_NOT_FOUND', `cannot read ${what} ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); check the path`);
  }
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
  const parsed = runConfigSchema.safeParse(value ?? {});
  if (!parsed.success) {
    problems.addAll(locator.zodProblems(parsed.error));
    problems.throwIfAny('BAD_RUN_CONFIG', summary);
  }
  const config = parsed.data as RunConfig;
  const stageConfigs = Object.entries(config.stages).map(([name, stageConfig]) => ({ name, config: stageConfig ?? {} }));

  const rootSetting = options.artifacts ?? config.artifacts ?? options.env.HAT_ARTIFACTS;
  const artifactsRoot = rootSetting && artifactsUri.safeParse(rootSetting).success ? normalizeArtifactsRoot(rootSetting) : undefined;
  if (!rootSetting) {
    problems.add(locator.problem(['artifacts'], 'no artifact store: set `artifacts:` in the config (s3://bucket/prefix or file:///dir), pass --artifacts, or set HAT_ARTIFACTS'));
  } else if (!artifactsRoot) {
    problems.add({ path: options.artifacts ? '--artifacts' : 'HAT_ARTIFACTS', message: `"${rootSetting}" must be an s3://bucket/prefix or file:///absolute/path URI` });
  }
  for (const { name } of stageConfigs) {
    if (!findStage(name)) problems.add(locator.problem(['stages', name], `unknown stage "${name}"; registered stages: ${stageNames().join(', ')}`));
  }

  if (options.runId !== undefined && !runIdPattern.test(options.runId)) {
    problems.add({ path: 'runId', message: `run id "${options.runId}" is not allowed: use letters, digits, ".", "_" and "-" (at most 100, not only digits)` });
    problems.throwIfAny('BAD_RUN_CONFIG', summary);
  }
  const configHash = hashValue({ seed: config.seed, artifacts: artifactsRoot, stages: config.stages });
  const runId = options.runId ?? config.runId ?? deriveRunId(configHash, options.now);
  const names = new Set(stageConfigs.map((stage) => stage.name));
  const dependsOn = new Map<string, Set<string>>();
  const resolve = (stage: string, reference: string, path: PathSegment[]): string | undefined => {
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
      locator.problem(path, `unknown reference \${${reference}}; use \${stages.<name>.manifestUri}, \${stages.<name>.outputUri}, \${run.id}, \${run.seed} or \${run.artifacts}`),
    );
    return undefined;
  };

  const resolved = stageConfigs.map(({ name, config: stageConfig }) => {
    dependsOn.set(name, new Set());
    return { name, value: substitute(stageConfig, ['stages', name], (reference, path) => resolve(name, reference, path)) };
  });
  for (const cycle of findCycles(dependsOn)) {
    problems.add(locator.problem(['stages', cycle[0] as string], `stages reference each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages that run before it`));
  }

  const stages: PlannedStage[] = [];
  for (const { name, value: stageValue } of resolved) {
    const stage = findStage(name);
    if (!stage) continue;
    const result = stage.input.safeParse(stageValue);
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
    });
  }
  problems.throwIfAny('BAD_RUN_CONFIG', summary);
  return { runId, configHash, artifactsRoot: artifactsRoot as string, seed: config.seed, createdAt: options.now.getTime(), source: options.source ?? 'cli', stages };
}

/** Replaces `${...}` in every string of a value; `resolve` returns undefined for a bad reference. */
function substitute(value: unknown, path: PathSegment[], resolve: (reference: string, path: PathSegment[]) => string | undefined): unknown {
  if (typeof value === 'string') return value.replace(referencePattern, (whole, reference: string) => resolve(reference.trim(), path) ?? whole);
  if (Array.isArray(value)) return value.map((item, index) => substitute(item, [...path, index], resolve));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, [...path, key], resolve)]));
  }
  return value;
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
