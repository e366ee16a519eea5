import type { Trajectory } from '../../trajectory/trajectory';
import type { Harness } from '../harness-types';
import type { RenderContext } from '../render';
import { prepareRewrite, rewriteTrajectory, type PreparedRewrite, type RewrittenCall } from './rewrite-trajectory';
import type { Leak } from './text-renamer';
import type { Timeline } from './trajectory-timeline';
import {
  checkChangedConstraints,
  checkRoundTrip,
  checkSchemas,
  compileToolValidators,
  findHarnessLeaks,
  findTrajectoryLeaks,
} from './variant-checks';
import type { Variant } from './variant-mapping';

/**
 * One (trajectory, variant) pair through rewrite and checks, in order; the first failing check
 * names the drop reason. The replay check runs after these, where the tasks are (the augment
 * stage), and has its own reasons.
 */

/** Checks in the order they run; each counts checked/failed in the stage statistics. */
export const augmentChecks = [
  'timeline',
  'calls',
  'constraints',
  'round_trip',
  'schema',
  'no_leakage',
  'replay',
] as const;
export type AugmentCheck = (typeof augmentChecks)[number];

/** Why a pair was dropped (never emitted). */
export const dropReasons = [
  'unparseable',
  'unmappable_call',
  'constraint_changed',
  'round_trip',
  'schema',
  'leak',
  'replay_result',
  'replay_reward',
] as const;
export type DropReason = (typeof dropReasons)[number];

/** A variant ready to rewrite trajectories: its rewrite tables and its harness-level leaks, computed once. */
export interface PreparedVariant extends PreparedRewrite {
  harnessLeaks: Leak[];
}

export function prepareVariant(canonical: Harness, variant: Variant): PreparedVariant {
  compileToolValidators(variant.harness);
  return { ...prepareRewrite(canonical, variant), harnessLeaks: findHarnessLeaks(variant.harness, variant.mapping) };
}

export type AugmentOutcome =
  | { ok: true; trajectory: Trajectory; calls: RewrittenCall[]; context: RenderContext; passed: AugmentCheck[] }
  | { ok: false; reason: DropReason; check: AugmentCheck; detail: string; passed: AugmentCheck[] };

/** Rewrites a trajectory (already split into `timeline`) into a variant and runs every check but replay. */
export function augmentTrajectory(
  trajectory: Trajectory,
  timeline: Timeline,
  context: RenderContext,
  prepared: PreparedVariant,
): AugmentOutcome {
  const passed: AugmentCheck[] = ['timeline'];
  const rewritten = rewriteTrajectory(trajectory, context, prepared, timeline);
  if (!rewritten.ok)
    return {
      ok: false,
      reason: rewritten.reason,
      check: rewritten.reason === 'unparseable' ? 'timeline' : 'calls',
      detail: rewritten.detail,
      passed,
    };
  passed.push('calls');
  const drop = (reason: DropReason, check: AugmentCheck, detail: string): AugmentOutcome => ({
    ok: false,
    reason,
    check,
    detail,
    passed,
  });

  const constraint = checkChangedConstraints(rewritten.trajectory, prepared.variant, rewritten.context);
  if (constraint) return drop('constraint_changed', 'constraints', constraint.detail);
  passed.push('constraints');
  const roundTrip = checkRoundTrip(rewritten.calls, prepared.variant.mapping);
  if (roundTrip) return drop('round_trip', 'round_trip', roundTrip.detail);
  passed.push('round_trip');
  const schema = checkSchemas(rewritten.calls);
  if (schema) return drop('schema', 'schema', schema.detail);
  passed.push('schema');
  const leaks = [
    ...prepared.harnessLeaks,
    ...findTrajectoryLeaks(
      rewritten.trajectory,
      rewritten.calls,
      prepared.variant.mapping,
      prepared.entityRenamer,
      rewritten.context,
    ),
  ];
  if (leaks.length > 0)
    return drop(
      'leak',
      'no_leakage',
      leaks
        .slice(0, 3)
        .map((leak) => `${leak.kind} ${JSON.stringify(leak.name)} in ${leak.where}`)
        .join('; '),
    );
  passed.push('no_leakage');
  return { ok: true, trajectory: rewritten.trajectory, calls: rewritten.calls, context: rewritten.context, passed };
}
