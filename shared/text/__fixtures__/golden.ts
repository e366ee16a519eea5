import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const goldenDirectory = path.join(__dirname, '..', '__golden__');

/**
 * The recorded contents of golden file `name` under shared/text/__golden__/, to compare `actual`
 * with. Golden files change only on purpose: with UPDATE_GOLDEN=1 the file is rewritten with
 * `actual` first; review the diff before committing.
 */
export function golden(name: string, actual: string): string {
  const file = path.join(goldenDirectory, name);
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, actual);
  }
  if (!existsSync(file)) throw new Error(`golden file ${file} is missing; run the tests with UPDATE_GOLDEN=1 to create it, then review it`);
  return readFileSync(file, 'utf8');
}
