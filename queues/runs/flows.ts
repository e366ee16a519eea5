import type { FlowJob, JobsOptions } from 'bullmq';
import { BadInputError } from '../../shared/errors';
import type { StageQueueDefaults } from '../stage-kit/define-stage';
import type { StageJobData } from '../bullmq/job-data';
import type { RunJobData } from './run-job-data';
import { checkJobData, runJobOptions, stageJobOptions } from '../bullmq/job-options';
import { runsQueueName } from '../stage-kit/stage-names';
import type { QueueContext } from '../bullmq/queue-context';
import type { PlannedStage, RunPlan } from './run-config';
import { handoffFlowJob, handoffJobData, handoffNodeName } from './run-handoff';
import { getStage } from '../stage-kit/stage-registry';

/**
 * A run as a BullMQ flow: the parent `run` job (queue `runs`, id = run id) and, below it, one
 * `stage` job per stage (queue = stage name). BullMQ runs parents after their children, so a
 * stage that reads another is placed above it: in a component of stages where every stage feeds
 * at most one other, the tree mirrors the references; where one stage feeds several, the
 * component becomes a chain in dependency order (BullMQ jobs have one parent). Stages that
 * reference nothing and are referenced by nothing are direct children of the run and run in
 * parallel.
 *
 * Failure: a stage below another stage fails its parent (`failParentOnFailure`); a stage directly
 * below the run is ignored on failure (`ignoreDependencyOnFailure`) so the run job still runs and
 * writes a run manifest that records the failure.
 */

export interface RunFlowOptions {
  /** HAT_JOB_DATA_LIMIT. */
  jobDataLimit: number;
  /** Queue defaults per stage; default: the registered stage's. */
  stageDefaults?: (stage: string) => StageQueueDefaults;
}

/** Which stage each stage's job hangs under (undefined: under the run job). */
export function treeParents(
  stages: readonly Pick<PlannedStage, 'name' | 'dependsOn'>[],
): Map<string, string | undefined> {
  const names = stages.map((stage) => stage.name);
  const dependents = new Map<string, string[]>(names.map((name) => [name, []]));
  for (const stage of stages) for (const dependency of stage.dependsOn) dependents.get(dependency)?.push(stage.name);

  // Connected components (references in either direction).
  const component = new Map<string, number>();
  let count = 0;
  for (const name of names) {
    if (component.has(name)) continue;
    const pending = [name];
    component.set(name, count);
    while (pending.length > 0) {
      const current = pending.pop() as string;
      const neighbours = [
        ...(stages.find((stage) => stage.name === current)?.dependsOn ?? []),
        ...(dependents.get(current) ?? []),
      ];
      for (const next of neighbours) {
        if (!component.has(next)) {
          component.set(next, count);
          pending.push(next);
        }
      }
    }
    count++;
  }

  const parents = new Map<string, string | undefined>();
  for (let index = 0; index < count; index++) {
    const members = names.filter((name) => component.get(name) === index);
    const isForest = members.every((name) => (dependents.get(name)?.length ?? 0) <= 1);
    if (isForest) {
      for (const name of members) parents.set(name, dependents.get(name)?.[0]);
    } else {
      const order = topologicalOrder(stages.filter((stage) => members.includes(stage.name)));
      order.forEach((name, position) => parents.set(name, order[position + 1]));
    }
  }
  return parents;
}

/** Dependencies first; ties keep config order. */
function topologicalOrder(stages: readonly Pick<PlannedStage, 'name' | 'dependsOn'>[]): string[] {
  const order: string[] = [];
  const remaining = [...stages];
  while (remaining.length > 0) {
    const next = remaining.findIndex((stage) =>
      stage.dependsOn.every(
        (dependency) => order.includes(dependency) || !remaining.some((item) => item.name === dependency),
      ),
    );
    if (next < 0)
      throw new BadInputError(
        'STAGE_CYCLE',
        `stages ${remaining.map((stage) => stage.name).join(', ')} reference each other in a cycle`,
      );
    order.push((remaining.splice(next, 1)[0] as PlannedStage).name);
  }
  return order;
}

/** The run's job data, as the run job carries it. */
export function runJobData(plan: RunPlan): RunJobData {
  return {
    v: 1,
    runId: plan.runId,
    configHash: plan.configHash,
    artifactsRoot: plan.artifactsRoot,
    seed: plan.seed,
    createdAt: plan.createdAt,
    source: plan.source,
    stages: plan.stages.map((stage) => ({
      name: stage.name,
      ...(stage.kind !== stage.name ? { kind: stage.kind } : {}),
      jobId: stage.jobId,
      dependsOn: stage.dependsOn,
      ...(stage.afterHandoff ? { afterHandoff: true } : {}),
      ...(stage.segment ? { handoff: stage.segment } : {}),
      ...(stage.round ? { policyVersion: stage.round.policyVersion } : {}),
    })),
    ...(plan.handoffs.length > 0
      ? {
          handoffs: plan.handoffs.map((handoff) => ({
            name: handoff.name,
            jobId: handoff.jobId,
            after: handoff.after,
            before: handoff.before,
            ...(handoff.policyVersion !== undefined ? { policyVersion: handoff.policyVersion } : {}),
          })),
        }
      : {}),
    ...(plan.resolvedInputs ? { resolvedInputs: plan.resolvedInputs } : {}),
    plan,
  };
}

/** A stage as its flow node needs it. */
export type FlowStage = Pick<PlannedStage, 'name' | 'jobId' | 'input' | 'inputHash' | 'outputPrefix' | 'dependsOn'> & {
  kind?: string;
};

/** What every stage node of one run shares. */
export interface StageForestContext {
  runId: string;
  seed: string;
  artifactsRoot: string;
  /** HAT_JOB_DATA_LIMIT. */
  jobDataLimit: number;
  /** Queue defaults per stage; default: the registered stage's. */
  stageDefaults?: (stage: string) => StageQueueDefaults;
}

/** A node placed among the stages like a stage that reads `dependsOn` (the trainer handoff). */
export interface ExtraFlowNode {
  name: string;
  dependsOn: string[];
  build(children: FlowJob[], isRoot: boolean): FlowJob;
}

/**
 * The flow trees of a group of stages (pure; checks every job's data size): one tree per root,
 * placed by `treeParents`. Roots get `ignoreDependencyOnFailure` (their parent, the run or the
 * handoff, always runs and records the failure); stages below another stage fail it.
 */
export function buildStageForest(
  stages: readonly FlowStage[],
  context: StageForestContext,
  extra?: ExtraFlowNode,
): FlowJob[] {
  const defaults = context.stageDefaults ?? ((kind: string) => getStage(kind).queue ?? {});
  const nodes: Array<Pick<PlannedStage, 'name' | 'dependsOn'>> = extra
    ? [...stages, { name: extra.name, dependsOn: extra.dependsOn }]
    : [...stages];
  const parents = treeParents(nodes);
  const childrenOf = (parent: string | undefined) => nodes.filter((node) => parents.get(node.name) === parent);

  const node = (name: string, isRoot: boolean): FlowJob => {
    const children = childrenOf(name).map((child) => node(child.name, false));
    if (extra && name === extra.name) return extra.build(children, isRoot);
    const stage = stages.find((item) => item.name === name) as FlowStage;
    const kind = stage.kind ?? stage.name;
    const data: StageJobData = {
      v: 1,
      runId: context.runId,
      stage: stage.name,
      ...(kind !== stage.name ? { kind } : {}),
      seed: context.seed,
      artifactsRoot: context.artifactsRoot,
      outputPrefix: stage.outputPrefix,
      input: stage.input,
      inputHash: stage.inputHash,
      upstream: childrenOf(name).map((child) => child.name),
      step: 'plan',
    };
    checkJobData(data, context.jobDataLimit, { stage: stage.name, jobId: stage.jobId });
    const opts: JobsOptions = {
      ...stageJobOptions(defaults(kind), context.jobDataLimit),
      jobId: stage.jobId,
      ...(isRoot ? { ignoreDependencyOnFailure: true } : { failParentOnFailure: true }),
    };
    const flowNode: FlowJob = { name: 'stage', queueName: kind, data, opts };
    return children.length > 0 ? { ...flowNode, children } : flowNode;
  };
  return childrenOf(undefined).map((root) => node(root.name, true));
}

/**
 * Builds the flow tree of a planned run (pure; checks every job's data size). Stages held back by
 * a trainer handoff are not in it: the first handoff's job carries them (and the handoffs after
 * it, nested) and adds them once its checkpoint is registered.
 */
export function buildRunFlow(plan: RunPlan, options: RunFlowOptions): FlowJob {
  const handoff = plan.handoffs[0];
  const extra: ExtraFlowNode | undefined = handoff
    ? {
        name: handoffNodeName(handoff.name),
        dependsOn: handoff.after,
        build: (children, isRoot) =>
          handoffFlowJob(handoffJobData(plan, handoff, []), children, isRoot, options.jobDataLimit),
      }
    : undefined;
  const children = buildStageForest(
    plan.stages.filter((stage) => !stage.afterHandoff),
    {
      runId: plan.runId,
      seed: plan.seed,
      artifactsRoot: plan.artifactsRoot,
      jobDataLimit: options.jobDataLimit,
      stageDefaults: options.stageDefaults,
    },
    extra,
  );
  const data = runJobData(plan);
  checkJobData(data, options.jobDataLimit, { label: 'the run job', jobId: plan.runId });
  return {
    name: 'run',
    queueName: runsQueueName,
    data,
    opts: { ...runJobOptions(options.jobDataLimit), jobId: plan.runId },
    children,
  };
}

export interface EnqueueRunResult {
  runId: string;
  /** False when a run with this id (and the same config) already exists: nothing was added. */
  enqueued: boolean;
  /** BullMQ state of the existing run job when it already existed. */
  existingState?: string;
}

/**
 * Enqueues a planned run. Idempotent: a run whose id exists with the same config is left alone
 * (deterministic job ids make even a concurrent double enqueue add nothing twice); one with a
 * different config is refused.
 */
export async function enqueueRun(context: QueueContext, plan: RunPlan): Promise<EnqueueRunResult> {
  const flow = buildRunFlow(plan, { jobDataLimit: context.env.HAT_JOB_DATA_LIMIT });
  const existing = await context.runsQueue.getJob(plan.runId);
  if (existing) {
    const existingHash = (existing.data as Partial<RunJobData>).configHash;
    if (existingHash !== plan.configHash) {
      throw new BadInputError(
        'RUN_EXISTS',
        `run ${plan.runId} already exists with a different config; choose another runId (or leave runId out to derive one)`,
      );
    }
    return { runId: plan.runId, enqueued: false, existingState: await existing.getState() };
  }
  await context.flowProducer.add(flow);
  return { runId: plan.runId, enqueued: true };
}
