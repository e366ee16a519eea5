import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The project root (where package.json is), from sources or from dist/. */
export function projectRoot(): string {
  let directory = __dirname;
  while (!existsSync(join(directory, 'package.json')) && dirname(directory) !== directory)
    directory = dirname(directory);
  return directory;
}
