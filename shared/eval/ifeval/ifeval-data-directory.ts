import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Where the shipped IFEval data lives (data/ifeval/ at the project root), from sources
 * (shared/eval/ifeval) and from compiled code (dist/shared/eval/ifeval) alike.
 */
export function ifevalDataDirectory(): string {
  const candidates = ['../../..', '../../../..'].map((up) => join(__dirname, up, 'data', 'ifeval'));
  return candidates.find((candidate) => existsSync(join(candidate, 'input_data.jsonl'))) ?? candidates[0];
}
