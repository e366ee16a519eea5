import { BadInputError } from '../../shared/errors';
import type { AnyStage } from './define-stage';

/** Stages by name: the backends of `hat worker`, `hat run` and `hat stage` are chosen here. */
const stages = new Map<string, AnyStage>();

/** Registers a stage; registering the same definition twice is a no-op, a different one with the same name is an error. */
export function registerStage(stage: AnyStage): AnyStage {
  const existing = stages.get(stage.name);
  if (existing && existing !== stage) {
    throw new BadInputError(
      'DUPLICATE_STAGE',
      `a different stage named "${stage.name}" is already registered; stage names must be unique`,
    );
  }
  stages.set(stage.name, stage);
  return stage;
}

/** The stage of that name, or undefined. */
export function findStage(name: string): AnyStage | undefined {
  return stages.get(name);
}

/** The stage of that name; BadInputError `UNKNOWN_STAGE` listing the registered ones otherwise. */
export function getStage(name: string): AnyStage {
  const stage = stages.get(name);
  if (!stage) {
    throw new BadInputError(
      'UNKNOWN_STAGE',
      `no stage named "${name}"; registered stages: ${stageNames().join(', ') || '(none)'}`,
    );
  }
  return stage;
}

/** Registered stages in name order. */
export function listStages(): AnyStage[] {
  return [...stages.values()].sort((left, right) => left.name.localeCompare(right.name));
}

export function stageNames(): string[] {
  return listStages().map((stage) => stage.name);
}

/** Removes a stage (tests that register throwaway stages). */
export function unregisterStage(name: string): void {
  stages.delete(name);
}
