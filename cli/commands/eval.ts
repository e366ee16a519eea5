import type { Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { openArtifactObject, type ArtifactStoreEnv } from '../../shared/artifacts/create-artifact-store';
import { BadInputError } from '../../shared/errors';
import {
  compareScores,
  formatScoresComparison,
  parsePairableScores,
  type PairableScores,
} from '../../shared/eval/item-outcomes';
import type { CliContext } from '../cli-context';
import { positiveInteger } from '../command-support';
import type { RegisterCommand } from './index';

interface CompareOptions {
  json?: boolean;
  labelA?: string;
  labelB?: string;
  seed: string;
  resamples: number;
}

async function readText(location: string, env: ArtifactStoreEnv): Promise<string> {
  try {
    if (/^(s3|file):\/\//.test(location)) {
      const { store, key } = openArtifactObject(location, env);
      try {
        return (await store.getBuffer(key)).toString('utf8');
      } finally {
        await store.close();
      }
    }
    return await readFile(location, 'utf8');
  } catch (error) {
    if (error instanceof BadInputError) throw error;
    throw new BadInputError(
      'EVAL_SCORES_NOT_FOUND',
      `cannot read ${location} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); pass the scores.json (or manifest.json) an eval stage wrote`,
      { cause: error },
    );
  }
}

function parseJson(text: string, location: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new BadInputError(
      'EVAL_BAD_SCORES',
      `${location} is not JSON (${(error as Error).message}); pass the scores.json an eval stage wrote`,
    );
  }
}

/** A scores.json, or an eval manifest.json (its `scores` object is read). */
export async function readPairableScores(location: string, env: ArtifactStoreEnv): Promise<PairableScores> {
  const value = parseJson(await readText(location, env), location) as {
    stage?: unknown;
    objects?: Array<{ kind?: string; uri?: string }>;
  } | null;
  if (value && typeof value === 'object' && typeof value.stage === 'string' && Array.isArray(value.objects)) {
    const scores = value.objects.find((object) => object.kind === 'scores' && typeof object.uri === 'string');
    if (value.stage !== 'eval' || !scores?.uri)
      throw new BadInputError(
        'EVAL_BAD_SCORES',
        `${location} is a ${value.stage} manifest without scores; pass an eval stage's scores.json or manifest.json`,
      );
    return parsePairableScores(parseJson(await readText(scores.uri, env), scores.uri), scores.uri);
  }
  return parsePairableScores(value, location);
}

/**
 * `hat eval compare <scoresA> <scoresB>`: pairs the items of two eval runs (night to night, or two
 * checkpoints scored apart) and gives B − A per suite and category with a paired-bootstrap 95%
 * interval, and the items that flipped between pass and fail.
 */
export const registerEvalCommand: RegisterCommand = (program: Command, context: CliContext) => {
  const evalCommand = program.command('eval').description('eval results: compare runs item by item');
  evalCommand
    .command('compare')
    .description(
      'pair the items of two eval runs: B − A per suite and category (paired bootstrap 95% interval), items that flipped',
    )
    .argument('<scoresA>', 'scores.json (or the eval manifest.json) of A: a path, or an s3:// / file:// URI')
    .argument('<scoresB>', 'scores.json (or manifest.json) of B')
    .option('--label-a <label>', "the model of A to pair (default: A's first model)")
    .option('--label-b <label>', "the model of B to pair (default: B's first model)")
    .option('--seed <seed>', 'bootstrap seed (same seed, same intervals)', '0')
    .option('--resamples <n>', 'bootstrap resamples', positiveInteger, 1000)
    .option('--json', 'print the comparison as JSON (every flipped item)')
    .action(async (a: string, b: string, options: CompareOptions) => {
      const [scoresA, scoresB] = await Promise.all([
        readPairableScores(a, context.env),
        readPairableScores(b, context.env),
      ]);
      const comparison = compareScores(
        { scores: scoresA, name: a, ...(options.labelA ? { label: options.labelA } : {}) },
        { scores: scoresB, name: b, ...(options.labelB ? { label: options.labelB } : {}) },
        { samples: options.resamples, seed: options.seed },
      );
      if (options.json) context.printJson(comparison);
      else context.stdout.write(formatScoresComparison(comparison));
    });
};
