import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError } from '../../shared/errors';
import { harnessHash } from '../../shared/harness/harness-hash';
import { generateVariantPool, type FamilyWeights } from '../../shared/harness/hsa/generate-variant';
import { hsaFamilies, type HsaFamily } from '../../shared/harness/hsa/variant-mapping';
import { writeVariant } from '../../shared/harness/hsa/write-variant';
import { loadHarness } from '../../shared/harness/load-harness';
import type { RegisterHarnessSubcommand } from './harness';

/**
 * `hat harness variants <dir> --n K --seed S --out <dir> [--families a,b]`: writes K HSA
 * variants of a harness as directories a person can read and `hat harness diff` can compare
 * with the original, each with its `mapping.json`. The same harness and seed give the same
 * variants, byte for byte.
 */

function parseCount(value: string): number {
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 1000)
    throw new BadInputError('BAD_OPTION', `--n must be a whole number from 1 to 1000, got ${JSON.stringify(value)}`);
  return count;
}

function parseFamilies(value: string | undefined): FamilyWeights | undefined {
  if (value === undefined) return undefined;
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const unknown = names.filter((name) => !(hsaFamilies as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0) {
    throw new BadInputError(
      'BAD_OPTION',
      `--families: unknown famil${unknown.length === 1 ? 'y' : 'ies'} ${unknown.join(', ') || '(none given)'}; use a comma-separated list of: ${hsaFamilies.join(', ')}`,
    );
  }
  // Named families apply to every variant: a person asking for them wants to see them.
  return Object.fromEntries(names.map((name) => [name as HsaFamily, 1]));
}

export const registerHarnessVariants: RegisterHarnessSubcommand = (harness, context) => {
  harness
    .command('variants')
    .description('write HSA variants of a harness (each a harness directory plus mapping.json)')
    .argument('<dir>', 'harness directory (harness.yaml, skills/, tools/)')
    .requiredOption('--n <k>', 'number of variants', parseCount)
    .requiredOption('--seed <s>', 'seed: the same seed gives the same variants')
    .requiredOption('--out <dir>', 'directory to write the variants into (one subdirectory each)')
    .option(
      '--families <list>',
      `families every variant applies (default: each with probability 0.6): ${hsaFamilies.join(',')}`,
    )
    .option('--json', 'print the summary as JSON')
    .action(
      async (
        directory: string,
        options: { n: number; seed: string; out: string; families?: string; json?: boolean },
      ) => {
        const weights = parseFamilies(options.families);
        const source = await loadHarness(directory);
        const pool = generateVariantPool(source, {
          size: options.n,
          seed: options.seed,
          ...(weights ? { weights } : {}),
        });
        await mkdir(options.out, { recursive: true });
        const written = [];
        for (const [index, variant] of pool.variants.entries()) {
          const name = `variant-${String(index + 1).padStart(2, '0')}-${variant.hash.slice(0, 8)}`;
          await writeVariant(variant, join(options.out, name));
          written.push({
            // Relative to --out, so the same seed gives the same variants.json wherever it is written.
            directory: name,
            hash: variant.hash,
            harnessHash: harnessHash(variant.harness),
            families: variant.mapping.families,
            renames: variant.mapping.renames.length,
            addedTools: variant.mapping.addedTools.length,
            addedSkills: variant.mapping.addedSkills.length,
          });
        }
        const summary = {
          source: { directory, hash: harnessHash(source) },
          seed: options.seed,
          variants: written,
          rejected: pool.rejected.map(({ families, reason }) => ({ families, reason })),
        };
        await writeFile(join(options.out, 'variants.json'), `${JSON.stringify(summary, null, 2)}\n`, 'utf8');
        if (options.json) return context.printJson(summary);
        context.print(
          `${written.length} variants of ${source.id} ${source.version} (seed ${options.seed}) in ${options.out}`,
        );
        for (const entry of written)
          context.print(
            `  ${join(options.out, entry.directory)}  ${entry.families.join(', ')}  (${entry.renames} renames, +${entry.addedTools} tools, +${entry.addedSkills} skills)`,
          );
        if (pool.rejected.length > 0)
          context.print(
            `  ${pool.rejected.length} draws rejected and redrawn (${[...new Set(pool.rejected.map((entry) => entry.reason))].join(', ')})`,
          );
        if (written.length < options.n)
          context.print(
            `  only ${written.length} of ${options.n} variants could be made; try other families or a larger harness`,
          );
        context.print(
          `compare one with the original: hat harness diff ${directory} ${join(options.out, written[0]?.directory ?? '<variant>')}`,
        );
      },
    );
};
