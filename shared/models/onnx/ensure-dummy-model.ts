import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { shortHash } from '../../hash/hash';
import { dummyGraphVersion, makeDummyDecoder } from './dummy-decoder';

/** Shape of a random-weight decoder made by `ensureDummyModel`. */
export interface DummyModelOptions {
  /** `qwen3`, `deepseek_v3`, `llama3_1`, `bytes`, or a directory with tokenizer files. */
  tokenizer: string;
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  seed: string;
}

/**
 * Generates a dummy decoder (once) under `cacheDir` and returns its directory. The directory
 * name comes from the options, so the same options always find the same model; it is written
 * under a temporary name and renamed, so a directory that exists is complete even when several
 * processes race to make it.
 */
export function ensureDummyModel(cacheDir: string, options: DummyModelOptions): string {
  const tokenizer = /^[a-z0-9_]+$/.test(options.tokenizer) ? options.tokenizer : resolve(options.tokenizer);
  const shape = { ...options, tokenizer };
  // The graph version is part of the name: a model cached by an older graph is made again.
  const hashed = { ...shape, graph: dummyGraphVersion };
  const name = `dummy-${basename(tokenizer).replace(/[^A-Za-z0-9_-]/g, '')}-l${shape.layers}-h${shape.hidden}-${shortHash(hashed, 10)}`;
  const directory = join(resolve(cacheDir), name);
  if (existsSync(directory)) return directory;
  mkdirSync(resolve(cacheDir), { recursive: true });
  const temporary = `${directory}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    makeDummyDecoder({ outDir: temporary, ...shape });
    renameSync(temporary, directory);
  } catch (error) {
    rmSync(temporary, { recursive: true, force: true });
    // Another process finished the same model first: its copy is as good as ours.
    if (!existsSync(directory)) throw error;
  }
  return directory;
}
