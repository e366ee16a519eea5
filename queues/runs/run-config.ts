import { readFile } from 'node:fs/promises';
import { z, type ZodError } from 'zod';
import type { HatEnv } from '../../shared/config/env';
import { collectDeprecatedSpellings } from '../../shared/config/deprecated-spellings';
import { credentialsProblem, describeUrlCredentials, findUrlCredentials } from '../../shared/config/url-credentials';
import { decodeUtf8Strict } from '../../shared/artifacts/utf8';
import { BadInputError, ProblemCollector, type Problem } from '../../shared/errors';
import { SourceDocument, formatPath, type PathSegment } from '../../shared/harness/source-document';
import { hashValue } from '../../shared/hash/hash';
import { deriveRunId, runIdPattern, runIdRule, stageJobId } from '../stage-kit/job-ids';
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

const artifactsUri = z
  .string()
  .regex(/^(s3|file):\/\/.+/, 'must be an s3://bucket/prefix or file:///absolute/path URI');

export const runConfigSchema = z
  .object({
    /** Run id; default `run-<UTC time>-<first 8 hex of the config hash>`. */
    runId: z.string().regex(runIdPattern, runIdRule).optional(),
    /** Root of the run's artifact store; default HAT_ARTIFACTS. */
    artifacts: artifactsUri.optional(),
    /** Seed of every random choice of the run. Default "0". */
    seed: z
      .union([z.string().min(1), z.number().int()])
      .transform(String)
      .default('0'),
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
  round?: { index: number; of: number; stage: string; policyVersion: number; maxStaleness?: number };
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
  const problem = (path: readonly PathSegment[], message: string): Problem => ({
    file,
    path: path.length > 0 ? formatPath(path) : undefined,
    message,
  });
  return {
    problem,
    zodProblems: (error, prefix = []) =>
      error.issues.map((issue) => problem([...prefix, ...(issue.path as PathSegment[])], issue.message)),
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
    throw new BadInputError(
      'CONFIG_NOT_FOUND',
      `cannot read ${what} ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); check the path`,
    );
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
  /**
   * Told of each deprecated spelling a stage config uses (e.g. `engine:` for `adapter:`), located
   * in the config, once per path; the CLI prints them as warnings. Default: not told.
   */
  onDeprecatedSpelling?: (warning: Problem) => void;
}

const referencePattern = /\$\{([^}]*)\}/g;
const stageReferencePattern = /^stages\.([A-Za-z0-9_-]+)\.(manifestUri|outputUri)$/;
const runReferencePattern = /^run\.(id|seed|artifacts)$/;

/** Validates a run config and plans the run; throws one ValidationError listing every problem. */
export function planRun(value: unknown, options: PlanRunOptions): RunPlan {
  return new RunPlanner(value, options).plan();
}

type HandoffInstance = ReturnType<typeof runInstances>['handoffs'][number];
type ResolvedStageConfig = { instance: StageInstance; value: Record<string, unknown> };

/**
 * One planning pass, in named phases that share what they found: the config and its stage
 * instances, the artifact root and run id, the reference graph (stages and handoffs), the handoff
 * chain, and the planned stages. Every phase adds its problems; the plan throws them all at once.
 */
class RunPlanner {
  private readonly locator: ProblemLocator;
  private readonly problems = new ProblemCollector();
  private readonly summary: string;
  private config!: RunConfig;
  private stageConfigs: StageInstance[] = [];
  private handoffs: HandoffInstance[] = [];
  private names = new Set<string>();
  private handoffNames = new Set<string>();
  private artifactsRoot: string | undefined;
  private configHash = '';
  private runId = '';
  /** Direct edges: a stage -> the stages it reads. */
  private readonly dependsOn = new Map<string, Set<string>>();
  /** A stage -> the handoffs whose checkpoint it waits for. */
  private waitsFor = new Map<string, Set<string>>();
  /** Stages and handoffs (`handoff:<name>`) -> what each waits for directly. */
  private graph = new Map<string, Set<string>>();
  private readonly ancestors = new Map<string, Set<string>>();
  private chain: HandoffInstance[] = [];
  private order = new Map<string, number>();
  /** The graph has a cycle: no handoff chain is planned. */
  private cyclic = false;

  constructor(
    private readonly value: unknown,
    private readonly options: PlanRunOptions,
  ) {
    this.locator = options.locator ?? plainLocator(options.file);
    this.summary = `${options.file ?? 'the run config'} has problems; fix them and run again`;
  }

  plan(): RunPlan {
    this.parseConfig();
    this.checkArtifactsRoot();
    this.checkStageKinds();
    this.identifyRun();
    this.checkGate();
    this.addHandoffEdges();
    const resolved = this.resolveStageConfigs();
    this.buildGraph();
    this.chainHandoffs();
    if (this.problems.ok) this.checkHandoffSegments();
    const stages = this.plannedStages(resolved);
    this.problems.throwIfAny('BAD_RUN_CONFIG', this.summary);
    return this.runPlan(stages);
  }

  private problem(path: readonly PathSegment[], message: string): void {
    this.problems.add(this.locator.problem(path, message));
  }

  /** The config's schema, its stage instances and handoffs, and the gate planned as a stage of its own. */
  private parseConfig(): void {
    for (const found of findUrlCredentials(this.value)) this.problem(found.path, found.message);
    const parsed = runConfigSchema.safeParse(withoutExtensionKeys(this.value ?? {}));
    if (!parsed.success) this.problems.addAll(this.locator.zodProblems(parsed.error));
    if (!parsed.success || !this.problems.ok) this.problems.throwIfAny('BAD_RUN_CONFIG', this.summary);
    this.config = parsed.data as RunConfig;
    const instances = runInstances(this.config);
    for (const problem of instances.problems) this.problem(problem.path, problem.message);
    this.stageConfigs = instances.stages;
    this.handoffs = instances.handoffs;
    // The gate is planned as a stage of its own (it reads the eval stage's manifest like any stage).
    const gate = this.config.gate;
    if (gate) {
      if (this.config.stages[gateStageName] !== undefined)
        this.problem(
          ['stages', gateStageName],
          `"${gateStageName}" is the name of the stage a gate: section adds; rename this stage`,
        );
      else {
        const after = this.stageConfigs.findIndex((stage) => stage.name === gate.eval);
        const gateInstance: StageInstance = {
          name: gateStageName,
          kind: gateStageName,
          config: gateStageConfig(gate),
          path: ['gate'],
        };
        this.stageConfigs.splice(after < 0 ? this.stageConfigs.length : after + 1, 0, gateInstance);
      }
    }
    this.names = new Set(this.stageConfigs.map((stage) => stage.name));
    this.handoffNames = new Set(this.handoffs.map((handoff) => handoff.name));
    this.waitsFor = new Map(this.stageConfigs.map((stage) => [stage.name, new Set<string>()]));
  }

  private checkArtifactsRoot(): void {
    const { options, config } = this;
    const rootSetting = options.artifacts ?? config.artifacts ?? options.env.HAT_ARTIFACTS;
    const settingName = options.artifacts ? '--artifacts' : config.artifacts ? 'artifacts' : 'HAT_ARTIFACTS';
    const credentials = rootSetting ? describeUrlCredentials(rootSetting) : undefined;
    this.artifactsRoot =
      rootSetting && !credentials && artifactsUri.safeParse(rootSetting).success
        ? normalizeArtifactsRoot(rootSetting)
        : undefined;
    if (credentials) {
      // The config's own field is already reported by findUrlCredentials.
      if (settingName !== 'artifacts')
        this.problems.add({
          path: settingName,
          message: credentialsProblem(credentials),
        });
    } else if (!rootSetting) {
      this.problem(
        ['artifacts'],
        'no artifact store: set `artifacts:` in the config (s3://bucket/prefix or file:///dir), pass --artifacts, or set HAT_ARTIFACTS',
      );
    } else if (!this.artifactsRoot) {
      this.problems.add({
        path: options.artifacts ? '--artifacts' : 'HAT_ARTIFACTS',
        message: `"${rootSetting}" must be an s3://bucket/prefix or file:///absolute/path URI`,
      });
    } else if (hasDotSegment(rootSetting)) {
      this.problem(
        ['artifacts'],
        `"${rootSetting}" has a "." or ".." segment; give the artifact root as a plain s3://bucket/prefix or file:///absolute/path`,
      );
    }
  }

  private checkStageKinds(): void {
    for (const stage of this.stageConfigs) {
      if (findStage(stage.kind)) continue;
      const where = stage.kind === stage.name ? stage.path : [...stage.path, 'stage'];
      this.problem(
        where,
        `unknown stage ${stage.kind === stage.name ? '' : 'kind '}"${stage.kind}"; registered stages: ${stageNames().join(', ')}`,
      );
    }
  }

  /** The config hash and the run id (given, configured, or derived from the hash and the time). */
  private identifyRun(): void {
    const { options, config } = this;
    if (options.runId !== undefined && !runIdPattern.test(options.runId)) {
      this.problems.add({
        path: 'runId',
        message: `run id "${options.runId}" is not allowed: ${runIdRule}`,
      });
      this.problems.throwIfAny('BAD_RUN_CONFIG', this.summary);
    }
    // Over the config as written: `latest` specs, not what they resolved to, so a retried scheduled
    // kickoff that resolves a newer partition still finds (and leaves alone) the run it started.
    this.configHash = hashValue({
      seed: config.seed,
      artifacts: this.artifactsRoot,
      stages: config.stages,
      handoff: config.handoff,
      handoffs: config.handoffs,
      ...(config.gate ? { gate: config.gate } : {}),
    });
    this.runId = options.runId ?? config.runId ?? deriveRunId(this.configHash, options.now);
  }

  private checkGate(): void {
    const gate = this.config.gate;
    if (!gate) return;
    if (!this.names.has(gate.eval))
      this.problem(
        ['gate', 'eval'],
        `stage "${gate.eval}" is not in this run; name the eval stage listed under stages`,
      );
    gate.before.forEach((name, index) => {
      if (!this.names.has(name) || name === gateStageName)
        this.problem(['gate', 'before', index], `stage "${name}" is not in this run; name a stage listed under stages`);
      else if (name === gate.eval)
        this.problem(
          ['gate', 'before', index],
          `stage "${name}" is the eval the gate reads; it cannot also wait for the gate`,
        );
    });
  }

  /** A handoff's `before` stages wait for its checkpoint; `after` and `before` must name stages of the run. */
  private addHandoffEdges(): void {
    for (const handoff of this.handoffs) {
      for (const field of ['after', 'before'] as const) {
        handoff.config[field].forEach((name, index) => {
          if (!this.names.has(name))
            this.problem(
              [...handoff.path, field, index],
              `stage "${name}" is not in this run; name a stage listed under stages`,
            );
          else if (field === 'before') this.waitsFor.get(name)?.add(handoff.name);
        });
      }
      handoff.config.before.forEach((name, index) => {
        if (handoff.config.after.includes(name))
          this.problem(
            [...handoff.path, 'before', index],
            `stage "${name}" is in both after and before; a stage runs either before the training or after it`,
          );
      });
    }
  }

  /** Every stage config with `${...}` references and `latest` inputs resolved (stage edges recorded on the way). */
  private resolveStageConfigs(): ResolvedStageConfig[] {
    const latest = findLatestSpecs(this.config.stages);
    for (const problem of latest.problems) this.problem(problem.path, problem.message);
    const resolvedByPath = new Map((this.options.resolvedInputs ?? []).map((input) => [input.path, input.resolved]));
    const resolveLatest = (value: Record<string, unknown>, path: PathSegment[]): unknown => {
      const found = latest.specs.find((spec) => formatPath(spec.path) === formatPath(path));
      if (!found) return value;
      return resolvedByPath.get(formatPath(path)) ?? latestPlaceholder(found.spec);
    };
    const resolved = this.stageConfigs.map((instance) => {
      this.dependsOn.set(instance.name, new Set());
      const value = substitute(
        instance.config,
        instance.path,
        (reference, path) => this.resolveReference(instance.name, reference, path),
        resolveLatest,
      ) as Record<string, unknown>;
      for (const problem of outputEscapes(value, instance.path)) this.problem(problem.path, problem.message);
      // Reported above; the stage schema need not call them unknown keys as well.
      return { instance, value: Object.fromEntries(Object.entries(value).filter(([key]) => !outputKeys.has(key))) };
    });
    // Stages the gate holds back read its decision: they run after it, and not at all on a hold.
    for (const name of this.config.gate?.before ?? [])
      if (name !== this.config.gate?.eval) this.dependsOn.get(name)?.add(gateStageName);
    return resolved;
  }

  /** What one `${reference}` in a stage's config stands for (undefined: a problem was added). */
  private resolveReference(stage: string, reference: string, path: PathSegment[]): string | undefined {
    const checkpointMatch = checkpointReferencePattern.exec(reference);
    if (checkpointMatch) {
      const [, handoff, field] = checkpointMatch as unknown as [string, string | undefined, string];
      if (!(checkpointFields as readonly string[]).includes(field)) {
        this.problem(path, `unknown reference \${${reference}}; a checkpoint offers ${checkpointFields.join(', ')}`);
      } else if (handoff === undefined) {
        this.problem(
          path,
          `\${${reference}} needs a trainer handoff: add handoff: { after: [...], before: [${stage}] } to the run config (or handoffs: { <name>: ... } and \${checkpoints.<name>.${field}})`,
        );
      } else if (!this.handoffNames.has(handoff)) {
        this.problem(
          path,
          `\${${reference}} names handoff "${handoff}", which this run does not have; handoffs: ${[...this.handoffNames].join(', ') || 'none (add handoffs: { <name>: { after: [...] } })'}`,
        );
      } else {
        this.waitsFor.get(stage)?.add(handoff);
      }
      // Kept as written: filled in when the checkpoint is registered.
      return `\${${reference}}`;
    }
    const stageMatch = stageReferencePattern.exec(reference);
    if (stageMatch) {
      const [, target, field] = stageMatch as unknown as [string, string, 'manifestUri' | 'outputUri'];
      if (!this.names.has(target)) {
        this.problem(
          path,
          `\${${reference}} refers to stage "${target}", which this run does not include; add it under stages`,
        );
        return undefined;
      }
      if (target === stage) {
        this.problem(path, `\${${reference}}: a stage cannot read its own output`);
        return undefined;
      }
      this.dependsOn.get(stage)?.add(target);
      if (!this.artifactsRoot) return undefined;
      const layout = runLayout(this.artifactsRoot, this.runId);
      return field === 'manifestUri' ? layout.stageManifestUri(target) : layout.stageOutputUri(target);
    }
    const runMatch = runReferencePattern.exec(reference);
    if (runMatch)
      return runMatch[1] === 'id' ? this.runId : runMatch[1] === 'seed' ? this.config.seed : this.artifactsRoot;
    this.problem(
      path,
      `unknown reference \${${reference}}; use \${stages.<name>.manifestUri}, \${stages.<name>.outputUri}, \${run.id}, \${run.seed}, \${run.artifacts}` +
        ' or ${checkpoints.<handoff>.<field>}',
    );
    return undefined;
  }

  /** The graph of stages and handoffs (`handoff:<name>`: a handoff may share its name with a stage), and its cycles. */
  private buildGraph(): void {
    const node = handoffNodeName;
    this.graph = new Map<string, Set<string>>(
      [...this.dependsOn].map(([name, targets]) => [
        name,
        new Set([...targets, ...[...(this.waitsFor.get(name) ?? [])].map(node)]),
      ]),
    );
    for (const handoff of this.handoffs) {
      this.graph.set(
        node(handoff.name),
        new Set([
          ...handoff.config.after.filter((name) => this.names.has(name)),
          ...(handoff.follows !== undefined ? [node(handoff.follows)] : []),
        ]),
      );
    }
    for (const cycle of findCycles(this.graph)) {
      const first = cycle[0];
      const path = isHandoffNode(first)
        ? (this.handoffs.find((handoff) => node(handoff.name) === first)?.path ?? [])
        : (this.stageConfigs.find((stage) => stage.name === first)?.path ?? ['stages', first]);
      const message = cycle.some(isHandoffNode)
        ? `stages and handoffs wait for each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages and checkpoints that come before it`
        : `stages reference each other in a cycle (${cycle.join(' -> ')}); a stage can only read stages that run before it`;
      this.problem(path, message);
      this.cyclic = true;
    }
  }

  /** Everything a node waits for, transitively (stages and handoffs). */
  private ancestorsOf(name: string, seen = new Set<string>()): Set<string> {
    const known = this.ancestors.get(name);
    if (known) return known;
    const found = new Set<string>();
    if (seen.has(name)) return found;
    seen.add(name);
    for (const next of this.graph.get(name) ?? []) {
      found.add(next);
      for (const item of this.ancestorsOf(next, seen)) found.add(item);
    }
    this.ancestors.set(name, found);
    return found;
  }

  /** Handoffs form a chain: each waits (through its after stages) for the one before it. */
  private chainHandoffs(): void {
    const node = handoffNodeName;
    const handoffCount = (name: string) => [...this.ancestorsOf(node(name))].filter(isHandoffNode).length;
    this.chain = this.cyclic
      ? []
      : [...this.handoffs].sort((left, right) => handoffCount(left.name) - handoffCount(right.name));
    for (let index = 1; index < this.chain.length; index++) {
      const previous = this.chain[index - 1];
      const current = this.chain[index];
      if (!this.ancestorsOf(node(current.name)).has(node(previous.name))) {
        this.problem(
          [...current.path, 'after'],
          `handoffs "${previous.name}" and "${current.name}" do not wait for each other; a run's handoffs follow one another (the method's order), so list a stage that waits for ${previous.name}'s checkpoint in ${current.name}'s after`,
        );
      }
    }
    this.order = new Map(this.chain.map((handoff, index) => [handoff.name, index]));
    for (const handoff of this.handoffs) {
      const { follows, base } = handoff.config as { follows?: string; base?: string };
      if (follows !== undefined && !this.handoffs.some((other) => other.name === follows))
        this.problem(
          [...handoff.path, 'follows'],
          `no handoff named "${follows}"; name one of ${this.handoffs.map((other) => other.name).join(', ')}`,
        );
      if (base === undefined || base === 'previous' || base === 'none') continue;
      if (!this.ancestorsOf(node(handoff.name)).has(node(base)))
        this.problem(
          [...handoff.path, 'base'],
          `training continues from "${base}", which is not a handoff before ${handoff.name}; use previous, none or the name of a handoff it waits for`,
        );
    }
  }

  /** The last handoff in the chain a stage (or handoff node) waits for: the one that adds it. */
  private segmentOf(name: string): string | undefined {
    let found: string | undefined;
    for (const item of this.ancestorsOf(name)) {
      const handoff = isHandoffNode(item) ? item.slice(handoffNodeName('').length) : undefined;
      if (
        handoff !== undefined &&
        this.order.has(handoff) &&
        (found === undefined || (this.order.get(handoff) as number) > (this.order.get(found) as number))
      )
        found = handoff;
    }
    return found;
  }

  /** A stage added by handoff H may read a stage added earlier only when H waited for it. */
  private checkHandoffSegments(): void {
    const node = handoffNodeName;
    const check = (name: string, path: PathSegment[], targets: Iterable<string>, what: string) => {
      const segment = this.segmentOf(name);
      if (segment === undefined) return;
      const owner = isHandoffNode(name)
        ? this.chain[(this.order.get(name.slice(node('').length)) as number) - 1]?.name
        : segment;
      if (owner === undefined) return;
      for (const target of targets) {
        if (!this.names.has(target) || this.segmentOf(target) === owner || this.ancestorsOf(node(owner)).has(target))
          continue;
        this.problem(
          path,
          `${what} stage "${target}", which handoff ${owner} does not wait for; add "${target}" to ${owner === 'train' && this.config.handoff ? 'handoff' : `handoffs.${owner}`}.after`,
        );
      }
    };
    for (const stage of this.stageConfigs) check(stage.name, stage.path, this.dependsOn.get(stage.name) ?? [], 'reads');
    // A round handoff with maxStaleness polls for its round, which an earlier handoff started (workers/run/handoff-processor.ts).
    for (const handoff of this.handoffs)
      if ((this.order.get(handoff.name) ?? 0) > 0 && handoff.follows === undefined)
        check(node(handoff.name), [...handoff.path, 'after'], handoff.config.after, 'waits for');
  }

  /** Each stage's input checked against its stage's schema (held-back stages with checkpoint placeholders). */
  private plannedStages(resolved: ResolvedStageConfig[]): PlannedStage[] {
    const stages: PlannedStage[] = [];
    for (const { instance, value: stageValue } of resolved) {
      const stage = findStage(instance.kind);
      if (!stage) continue;
      const segment = this.problems.ok ? this.segmentOf(instance.name) : undefined;
      const held = [...this.ancestorsOf(instance.name)].some(isHandoffNode);
      // A held-back stage is validated with placeholders for the checkpoint it will get.
      const checked = held ? fillCheckpointPlaceholders(stageValue) : stageValue;
      const { result, spellings } = collectDeprecatedSpellings(checked, () => stage.input.safeParse(checked));
      for (const spelling of spellings)
        this.options.onDeprecatedSpelling?.(
          this.locator.problem([...instance.path, ...spelling.path], spelling.message),
        );
      if (!result.success) {
        this.problems.addAll(this.locator.zodProblems(result.error, instance.path));
        continue;
      }
      const inputHash = hashValue(result.data);
      const policyVersion = (stageValue as { policyVersion?: unknown }).policyVersion;
      stages.push({
        name: instance.name,
        kind: instance.kind,
        input: result.data,
        inputHash,
        jobId: stageJobId(this.runId, instance.name, inputHash),
        outputPrefix: stagePrefix(this.runId, instance.name),
        dependsOn: [...(this.dependsOn.get(instance.name) ?? [])],
        ...(held ? { afterHandoff: true as const, template: stageValue, ...(segment ? { segment } : {}) } : {}),
        ...(instance.round
          ? {
              round: {
                ...instance.round,
                policyVersion: typeof policyVersion === 'number' ? policyVersion : instance.round.index,
              },
            }
          : {}),
      });
    }
    return stages;
  }

  private runPlan(stages: PlannedStage[]): RunPlan {
    const { options, config, runId } = this;
    const waiting = (handoff: string) =>
      this.stageConfigs
        .filter((stage) => this.ancestorsOf(stage.name).has(handoffNodeName(handoff)))
        .map((stage) => stage.name);
    return {
      runId,
      configHash: this.configHash,
      artifactsRoot: this.artifactsRoot as string,
      seed: config.seed,
      createdAt: options.now.getTime(),
      source: options.source ?? 'cli',
      stages,
      handoffs: this.chain.map((handoff, index) => ({
        name: handoff.name,
        jobId: handoffJobId(runId, handoff.name),
        after: handoff.config.after,
        before: waiting(handoff.name),
        timeoutMs: Math.round(handoff.config.timeoutMinutes * 60_000),
        pollIntervalMs: handoff.config.pollSeconds * 1_000,
        hyperparameters: handoff.config.hyperparameters,
        ...(handoff.config.trainer ? { trainer: handoff.config.trainer } : {}),
        ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}),
        ...(handoff.maxStaleness !== undefined ? { maxStaleness: handoff.maxStaleness } : {}),
        ...(handoff.follows !== undefined && handoff.maxStaleness === undefined ? { follows: handoff.follows } : {}),
        ...(handoff.config.base !== 'previous' ? { baseFrom: handoff.config.base } : {}),
        order: index,
      })),
      ...(options.resolvedInputs && options.resolvedInputs.length > 0
        ? { resolvedInputs: options.resolvedInputs }
        : {}),
    };
  }
}

/**
 * Top-level keys starting with `x-` hold YAML anchors shared by several stages or handoffs (as in
 * Compose files); they are not part of the run.
 */
function withoutExtensionKeys(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => !key.startsWith('x-')));
}

/** Handoff nodes in the run graph are `handoff:<name>`. */
function isHandoffNode(name: string): boolean {
  return name.startsWith(handoffNodeName(''));
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
  if (typeof value === 'string')
    return value.replace(referencePattern, (whole, reference: string) => resolve(reference.trim(), path) ?? whole);
  if (isLatestSpecValue(value)) return resolveLatest(value, path);
  if (Array.isArray(value)) {
    return value.flatMap((item, index) => {
      const replaced = substitute(item, [...path, index], resolve, resolveLatest);
      return isLatestSpecValue(item) && Array.isArray(replaced) ? replaced : [replaced];
    });
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, substitute(item, [...path, key], resolve, resolveLatest)]),
    );
  }
  return value;
}

/** Config keys that would choose where a stage writes; stages write under `runs/<runId>/<stage>/` of the run's store, always. */
const outputKeys = new Set(['out', 'output', 'outputPrefix', 'outputUri', 'outputKey']);

/** Whether a URI's path has `.` or `..` segments (`s3://b/runs/../x`, `file:///data/../etc`). */
function hasDotSegment(uri: string): boolean {
  const path = uri.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '');
  return path
    .split('/')
    .some((segment) => segment === '.' || segment === '..' || segment === '%2e%2e' || segment === '%2E%2E');
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
      if (/^(s3|file):\/\//.test(item) && hasDotSegment(item))
        found.push({
          path: at,
          message: `"${item}" has a "." or ".." segment; object keys cannot climb out of their prefix, give the URI without them`,
        });
      return;
    }
    if (Array.isArray(item)) return item.forEach((entry, index) => visit(entry, [...at, index]));
    if (item === null || typeof item !== 'object') return;
    for (const [key, entry] of Object.entries(item)) {
      if (at.length === path.length && outputKeys.has(key)) {
        found.push({
          path: [...at, key],
          message: `a run decides where stages write (runs/<runId>/<stage>/ under the run's artifacts); remove "${key}" and set artifacts: to choose the store`,
        });
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
