import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IfevalItem } from './ifeval-types';

const dataFile = 'input_data.jsonl';

/** Where the shipped IFEval data lives (data/ifeval/ at the project root), from sources and compiled dist/ alike. */
export function ifevalDataDirectory(): string {
  const candidates = ['../../..', '../../../..'].map((up) => join(__dirname, up, 'data', 'ifeval'));
  return candidates.find((candidate) => existsSync(join(candidate, dataFile))) ?? (candidates[0] as string);
}

/** Parses and validates IFEval JSONL text (the reference `input_data.jsonl` format). */
export function parseIfevalItems(text: string, file: string): IfevalItem[] {
  void text;
  void file;
  throw new Error('not implemented yet');
}

let cached: IfevalItem[] | undefined;

/** The 541 shipped IFEval prompts, validated. */
export function loadIfevalItems(): IfevalItem[] {
  if (!cached) {
    const file = join(ifevalDataDirectory(), dataFile);
    cached = parseIfevalItems(readFileSync(file, 'utf8'), file);
  }
  return cached.map((item) => ({ ...item, instructionIds: [...item.instructionIds], kwargs: item.kwargs.map((kwargs) => ({ ...kwargs })) }));
}
