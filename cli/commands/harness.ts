import type { Command } from 'commander';
import { join } from 'node:path';
import type { CliContext } from '../cli-context';
import type { RegisterCommand } from './index';
import { registerHarnessVariants } from './harness-variants';
import { ValidationError } from '../../shared/errors';
import { diffHarnesses, formatHarnessDiff } from '../../shared/harness/harness-diff';
import { harnessHash } from '../../shared/harness/harness-hash';
import { BAD_HARNESS, loadHarness } from '../../shared/harness/load-harness';
import type { Harness } from '../../shared/harness/harness-types';

/** A subcommand of `hat harness`, registered on the `harness` command. */
export type RegisterHarnessSubcommand = (harness: Command, context: CliContext) => void;

/** Counts and hash of a harness, as `hat harness validate` reports them. */
export function harnessSummary(harness: Harness) {
  return {
    id: harness.id,
    version: harness.version,
    format: harness.prompt.format,
    hash: harnessHash(harness),
    counts: {
      sections: harness.prompt.sections.length,
      skills: harness.skills.length,
      tools: harness.tools.length,
      hooks: harness.hooks.length,
    },
    sections: harness.prompt.sections.map((section) => section.id),
  };
}

const registerValidate: RegisterHarnessSubcommand = (harness, context) => {
  harness
    .command('validate')
    .description('load a harness directory and report every problem at once (exit 2 when there is any)')
    .argument('<dir>', 'harness directory (harness.yaml, skills/, tools/)')
    .option('--json', 'print the summary as JSON')
    .action(async (directory: string, options: { json?: boolean }) => {
      const summary = harnessSummary(await loadHarness(directory));
      if (options.json) return context.printJson(summary);
      context.print(`harness ${summary.id} ${summary.version}: ok`);
      context.print(`  format:   ${summary.format}`);
      context.print(`  sections: ${summary.counts.sections} (${summary.sections.join(', ')})`);
      context.print(`  skills:   ${summary.counts.skills}`);
      context.print(`  tools:    ${summary.counts.tools}`);
      context.print(`  hooks:    ${summary.counts.hooks}`);
      context.print(`  hash:     ${summary.hash}`);
    });
};

/** Loads both sides; when both are invalid, reports the problems of both in one error. */
async function loadPair(first: string, second: string): Promise<[Harness, Harness]> {
  const results = await Promise.allSettled([loadHarness(first), loadHarness(second)]);
  const failures = results.flatMap((result, index) =>
    result.status === 'rejected' ? [{ error: result.reason as unknown, directory: index === 0 ? first : second }] : [],
  );
  if (failures.length === 2 && failures.every((failure) => failure.error instanceof ValidationError)) {
    const problems = failures.flatMap(({ error, directory }) =>
      (error as ValidationError).problems.map((problem) => ({ ...problem, file: join(directory, problem.file ?? '') })),
    );
    throw new ValidationError(BAD_HARNESS, 'invalid harnesses', problems);
  }
  if (failures[0]) throw failures[0].error;
  return results.map((result) => (result as PromiseFulfilledResult<Harness>).value) as [Harness, Harness];
}

const registerDiff: RegisterHarnessSubcommand = (harness, context) => {
  harness
    .command('diff')
    .description('semantic diff of two harnesses: tools, parameters, skills, hooks, sections')
    .argument('<a>', 'harness directory before')
    .argument('<b>', 'harness directory after')
    .option('--json', 'print the structured diff as JSON')
    .action(async (first: string, second: string, options: { json?: boolean }) => {
      const diff = diffHarnesses(...(await loadPair(first, second)));
      if (options.json) return context.printJson(diff);
      context.stdout.write(formatHarnessDiff(diff));
    });
};

/**
 * Subcommands of `hat harness`, in help order. `hat harness variants <dir> --n <k> --seed <s>
 * --out <dir>` (HSA) belongs here: its module exports a `RegisterHarnessSubcommand` and is
 * added to this list.
 */
export const harnessSubcommands: RegisterHarnessSubcommand[] = [
  registerValidate,
  registerDiff,
  registerHarnessVariants,
];

export const registerHarnessCommand: RegisterCommand = (program, context) => {
  const harness = program.command('harness').description('validate, compare and vary harness directories');
  for (const register of harnessSubcommands) register(harness, context);
};
