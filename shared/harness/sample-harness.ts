import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { HARNESS_FILE } from './harness-files';

/**
 * Directory of the sample live-room host harness (`examples/harness/live-host`), found from
 * sources (`shared/harness/`) and from compiled code (`dist/shared/harness/`) alike.
 */
export function sampleHarnessDirectory(): string {
  const candidates = ['../..', '../../..'].map((up) => join(__dirname, up, 'examples', 'harness', 'live-host'));
  return candidates.find((candidate) => existsSync(join(candidate, HARNESS_FILE))) ?? candidates[0];
}
