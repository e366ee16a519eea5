import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { partIdOf } from '../../queues/stage-kit/job-ids';
import { JsonlWriter } from '../../shared/artifacts/jsonl-writer';
import { hashValue } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { augmentTrajectory, prepareVariant, type PreparedVariant } from '../../shared/harness/hsa/augment-trajectory';
import { generateVariantPool, type VariantPool } from '../../shared/harness/hsa/generate-variant';
import { parseRecordedTrajectory } from '../../shared/harness/hsa/rewrite-trajectory';
import type { RenderContext } from '../../shared/harness/render';
import { Rng } from '../../shared/random/rng';
import { renderContextOf } from '../../shared/simulator/room-context';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { createWorld, type World } from '../../shared/simulator/world/world';
import { trajectorySchema, type Trajectory } from '../../shared/trajectory/trajectory';
import { trajectoryLine } from '../../shared/text/trajectory-line';
import {
  relabelEntrySchema,
  type AugmentPartInput,
  type AugmentPartOutput,
  type RelabelEntry,
} from './augment-contract';
import { expandInputs, readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { readWantedTasks } from './task-lookup';
import { countPair, emptyStats, type AugmentStats } from './augment-stats';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { replayCheck, scoreRecorded, scoredTurns } from './replay-check';
import { writtenObjectOf } from '../../queues/stage-kit/written-object';

/**
 * One part of the augment stage: reads its range of trajectories and the tasks they played,
 * rewrites each into `variantsPerTrajectory` variants of the pool, runs the checks, and writes
 * the kept trajectories, the relabel entries and a few before/after samples for the report.
 * Which trajectory gets which variants depends only on the seed and the trajectory id, so the
 * output does not depend on how the input was split into parts.
 */

export const AUGMENTED_SCHEMA_VERSION = 1;

/** A before/after pair for the HTML report. */
export interface AugmentSample {
  source: Trajectory;
  augmented: Trajectory;
  variantHash: string;
}

export interface AugmentEnvironment {
  canonical: Harness;
  canonicalHash: string;
  pool: VariantPool;
  prepared: PreparedVariant[];
}

/**
 * Pools by (harness content, seed, families, size): a worker process makes each pool once,
 * whatever part it runs. The harness is read for every part (a few small files), so a harness
 * changed under the same URI gets a new pool rather than a stale one.
 */
const environments = new Map<string, AugmentEnvironment>();
const ENVIRONMENT_CACHE_LIMIT = 4;

export async function augmentEnvironment(
  part: Pick<AugmentPartInput, 'harness' | 'seed' | 'families' | 'variantPool'>,
  openObject: StageDeps['openObject'],
): Promise<AugmentEnvironment> {
  const canonical = await loadHarnessFromUri(part.harness, openObject);
  const canonicalHash = harnessHash(canonical);
  const key = hashValue({ harness: canonicalHash, seed: part.seed, families: part.families, size: part.variantPool });
  let environment = environments.get(key);
  if (environment === undefined) {
    const pool = generateVariantPool(canonical, { size: part.variantPool, seed: part.seed, weights: part.families });
    environment = {
      canonical,
      canonicalHash,
      pool,
      prepared: pool.variants.map((variant) => prepareVariant(canonical, variant)),
    };
    if (environments.size >= ENVIRONMENT_CACHE_LIMIT) environments.delete(environments.keys().next().value as string);
    environments.set(key, environment);
  }
  return environment;
}

/** Object keys of a part's outputs. */
export function augmentPartKeys(deps: Pick<StageDeps, 'output'>, index: number) {
  const id = partIdOf(index);
  return {
    trajectories: deps.output.key(`trajectories/${id}.jsonl.gz`),
    relabel: deps.output.key(`_parts/relabel-${id}.jsonl.gz`),
    samples: deps.output.key(`_parts/samples-${id}.json`),
  };
}

/** Variants of the pool a trajectory is rewritten into: distinct, seeded by the trajectory id only. */
export function assignVariants(seed: string, trajectoryId: string, poolSize: number, count: number): number[] {
  const indexes = Array.from({ length: poolSize }, (_, index) => index);
  return new Rng(seed).fork(`assign/${trajectoryId}`).sample(indexes, count);
}

const renderContextSchema = z.object({
  campaignActive: z.boolean(),
  activeCoupon: z.string().optional(),
  featuredItem: z.string().optional(),
  campaign: z.string().optional(),
  roomContext: z.string().optional(),
});

export async function augmentPart(part: AugmentPartInput, deps: StageDeps): Promise<AugmentPartOutput> {
  const environment = await augmentEnvironment(part, deps.openObject);
  const { canonical, prepared } = environment;
  const { records: trajectories, sha256 } = await readRecordRange(
    deps.openObject,
    part.source.uri,
    trajectorySchema,
    part.source.start,
    part.source.end,
    part.source.sha256,
  );
  const wanted = new Set(trajectories.map((trajectory) => trajectory.taskId));
  const taskRecords =
    part.tasks.length === 0
      ? { records: new Map<string, Task>(), objects: [] }
      : await readWantedTasks(
          await expandInputs(part.tasks, deps.openObject, 'tasks', 'tasks'),
          deps.openObject,
          wanted,
        );
  const tasks = taskRecords.records;
  const inputs = [{ uri: part.source.uri, sha256 }, ...taskRecords.objects];

  const keys = augmentPartKeys(deps, part.index);
  const output = JsonlWriter.open<Trajectory>(deps.store, keys.trajectories, {
    schema: trajectorySchema,
    stringify: trajectoryLine,
  });
  const relabel = JsonlWriter.open<RelabelEntry>(deps.store, keys.relabel, { schema: relabelEntrySchema });
  const stats = emptyStats();
  const samples: AugmentSample[] = [];
  const variantsUsed = new Set<string>();
  const count = Math.min(part.variantsPerTrajectory, prepared.length);

  try {
    for (const [position, trajectory] of trajectories.entries()) {
      if (deps.signal.aborted) throw deps.signal.reason ?? new Error('aborted');
      stats.trajectories.read++;
      const chosen = assignVariants(part.seed, trajectory.id, prepared.length, count).map((index) => prepared[index]);
      const task = tasks.get(trajectory.taskId);
      const world = task === undefined ? undefined : createWorld(task.room);
      const recordedContext = renderContextSchema.safeParse(trajectory.meta.renderContext);
      const context: RenderContext | undefined = recordedContext.success
        ? recordedContext.data
        : world === undefined
          ? undefined
          : renderContextOf(world);
      if (context === undefined || (part.replayCheck && (task === undefined || world === undefined))) {
        stats.trajectories.missingTask++;
        for (const variant of chosen)
          countPair(stats, variant.variant.mapping.families, { kept: false, reason: 'missing_task' }, []);
        continue;
      }
      const parsed = parseRecordedTrajectory(trajectory, canonical, context);
      if (!parsed.ok) {
        stats.trajectories.unparseable++;
        deps.logger.debug(
          { trajectoryId: trajectory.id, detail: parsed.detail },
          'trajectory does not match the canonical harness',
        );
        for (const variant of chosen)
          countPair(stats, variant.variant.mapping.families, { kept: false, reason: 'unparseable' }, [], 'timeline');
        continue;
      }
      const recordedReward = part.replayCheck
        ? scoreRecorded(task as Task, world as World, canonical, trajectory)
        : undefined;
      for (const variant of chosen) {
        const families = variant.variant.mapping.families;
        const outcome = augmentTrajectory(trajectory, parsed.timeline, context, variant);
        if (!outcome.ok) {
          countPair(stats, families, { kept: false, reason: outcome.reason }, outcome.passed, outcome.check);
          if (outcome.reason === 'constraint_changed') {
            await relabel.write({
              taskId: trajectory.taskId,
              trajectoryId: trajectory.id,
              reason: outcome.reason,
              variantHash: variant.variant.hash,
              detail: outcome.detail,
            });
            // Whoever relabels needs the variant's files.
            variantsUsed.add(variant.variant.hash);
            stats.relabel++;
          }
          continue;
        }
        let reward = trajectory.reward;
        const passed = [...outcome.passed];
        if (part.replayCheck) {
          const replay = replayCheck({
            task: task as Task,
            world: world as World,
            variant: variant.variant.harness,
            messages: outcome.trajectory.messages,
            calls: outcome.calls,
            recordedReward: recordedReward as Trajectory['reward'],
            turnCount: scoredTurns(trajectory, task as Task),
          });
          if (!replay.ok) {
            deps.logger.debug(
              { trajectoryId: trajectory.id, variant: variant.variant.hash, detail: replay.detail },
              'replay check failed',
            );
            countPair(stats, families, { kept: false, reason: replay.reason }, passed, 'replay');
            continue;
          }
          reward = replay.reward;
          passed.push('replay');
        }
        const augmented: Trajectory = {
          ...outcome.trajectory,
          reward,
          meta: {
            ...outcome.trajectory.meta,
            augment: { variantHash: variant.variant.hash, families, replayChecked: part.replayCheck },
          },
        };
        await output.write(augmented);
        countPair(stats, families, { kept: true }, passed);
        variantsUsed.add(variant.variant.hash);
        if (samples.length < part.reportSamples)
          samples.push({ source: trajectory, augmented, variantHash: variant.variant.hash });
      }
      deps.progress({ done: position + 1, total: trajectories.length });
    }
  } catch (error) {
    await Promise.all([output.abort(error), relabel.abort(error)]);
    throw error;
  }
  const [written, relabelled] = await Promise.all([output.close(), relabel.close()]);
  await deps.store.put(keys.samples, JSON.stringify(samples), { contentType: 'application/json' });
  return {
    index: part.index,
    trajectories: writtenObjectOf(written),
    relabel: writtenObjectOf(relabelled),
    samplesKey: keys.samples,
    variantsUsed: [...variantsUsed].sort(),
    stats: stats as unknown as Record<string, unknown>,
    inputs,
  };
}

/** The part's statistics as written by augmentPart. */
export function partStats(output: AugmentPartOutput): AugmentStats {
  return output.stats as unknown as AugmentStats;
}
