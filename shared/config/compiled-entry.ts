import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The compiled JavaScript of a project file that runs as a thread entry (`projectPath` from the
 * project root, without extension): in the same tree when this code runs compiled, else in
 * `dist/` (sources run by jest). Undefined when it has not been built.
 */
export function compiledEntryFile(projectPath: string): string | undefined {
  // This file sits two folders below the root of either tree (shared/config/).
  const root = join(__dirname, '..', '..');
  const file = __filename.endsWith('.js') ? join(root, `${projectPath}.js`) : join(root, 'dist', `${projectPath}.js`);
  return existsSync(file) ? file : undefined;
}
