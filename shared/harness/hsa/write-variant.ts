import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeHarnessFiles, type HarnessFiles } from '../harness-files';
import { harnessToFiles } from '../write-harness';
import type { Variant } from './variant-mapping';

/** Name of the mapping file beside a variant's harness files. */
export const MAPPING_FILE = 'mapping.json';

/** The files of a variant: its harness files (loadable as a harness) plus `mapping.json`. */
export function variantToFiles(variant: Variant): HarnessFiles {
  return { ...harnessToFiles(variant.harness), [MAPPING_FILE]: `${JSON.stringify(variant.mapping, null, 2)}\n` };
}

/** Writes a variant as a harness directory with its `mapping.json`. */
export async function writeVariant(variant: Variant, directory: string): Promise<void> {
  const { [MAPPING_FILE]: mapping, ...harnessFiles } = variantToFiles(variant);
  await writeHarnessFiles(harnessFiles, directory);
  await writeFile(join(directory, MAPPING_FILE), mapping, 'utf8');
}
