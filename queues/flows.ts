import type { FlowJob, JobsOptions } from 'bullmq';
import { BadInputError } from '../shared/errors';
import type { StageQueueDefaults } from './define-stage';
import type { RunJobData, StageJobData } from './job-data';
import { checkJobDataSize, runJobOptions, stageJobOptions } from './job-options';
import { runsQueueName } from './queue-names';
import type { QueueContext } from './queue-context';
import type { PlannedStage, RunPlan } from './run-config';
import { getStage } from './stage-registry';

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
export function treeParents(stages: readonly Pick<PlannedStage, 'name' | 'dependsOn'>[]): Map<string, string | undefined> {
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
      const neighbours = [...(stages.find((stage) => stage.name === current)?.dependsOn ?? []), ...(dependents.get(current) ?? [])];
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
    const next = remaining.findIndex((stage) => stage.dependsOn.every((dependency) => order.includes(dependency) || !remaining.some((item) => item.name === dependency)));
    if (next < 0) throw new BadInputError('STAGE_CYCLE', `stages ${remaining.map((stage) => stage.name).join(', ')} reference each other in a cycle`);
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
    stages: plan.stages.map((stage) => ({ name: stage.name, jobId: stage.jobId, dependsOn: stage.dependsOn })),
  };
}

/** Builds the flow tree of a planned run (pure; checks every job's data size). */
export function buildRunFlow(plan: RunPlan, options: RunFlowOptions): FlowJob {
  const defaults = options.stageDefaults ?? ((name: string) => getStage(name).queue ?? {});
  const parents = treeParents(plan.stages);
  const childrenOf = (parent: string | undefined) => plan.stages.filter((stage) => parents.get(stage.name) === parent);

  const stageNode = (stage: PlannedStage, underRun: boolean): FlowJob => {
    const children = childrenOf(stage.name);
    const data: StageJobData = {
      v: 1,
      runId: plan.runId,
      stage: stage.name,
      seed: plan.seed,
      artifactsRoot: plan.artifactsRoot,
      outputPrefix: stage.outputPrefix,
      input: stage.input,
      inputHash: stage.inputHash,
      upstream: children.map((child) => child.name),
      step: 'plan',
    };
    checkJobDataSize(data, options.jobDataLimit, { stage: stage.name, jobId: stage.jobId });
    const opts: JobsOptions = {
      ...stageJobOptions(defaults(stage.name), options.jobDataLimit),
      jobId: stage.jobId,
      ...(underRun ? { ignoreDependencyOnFailure: true } : { failParentOnFailure: true }),
    };
    const node: FlowJob = { name: 'stage', queueName: stage.name, data, opts };
    return children.length > 0 ? { ...node, children: children.map((child) => stageNode(child, false)) } : node;
  };

  const children = childrenOf(undefined).map((stage) => stageNode(stage, true));
  const data = runJobData(plan);
  checkJobDataSize(data, options.jobDataLimit, { label: 'the run job', jobId: plan.runId });
  return { name: 'run', queueName: runsQueueName, data, opts: { ...runJobOptions(options.jobDataLimit), jobId: plan.runId }, children };
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
