import type { Trajectory } from '../trajectory/trajectory';
import { stringifyRecordKeepingFloatsIn } from './python-values';

/**
 * The fields of a trajectory record that are written and read keeping float-ness: its tool
 * schemas, which a chat template prints (`"minimum": 1.0` as Python prints it, not `1`).
 */
export const trajectoryFloatFields: readonly string[] = ['tools'];

/**
 * A trajectory's JSONL line: JSON.stringify's, except that a float in its tool schemas keeps its
 * `.0` (JsonlWriter's `stringify` for the stages that write trajectories).
 */
export function trajectoryLine(trajectory: Trajectory): string {
  return stringifyRecordKeepingFloatsIn(trajectory, trajectoryFloatFields);
}
