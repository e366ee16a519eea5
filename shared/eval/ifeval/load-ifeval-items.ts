import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError, type Problem } from '../../errors';
import { validateInstructionSpec } from './check-instruction';
import { ifevalDataDirectory } from './ifeval-data-directory';
import type { IfevalItem } from './ifeval-types';

export { ifevalDataDirectory } from './ifeval-data-directory';

/**
 * Parses and validates IFEval JSONL text (the reference `input_data.jsonl` format: `key`,
 * `prompt`, `instruction_id_list`, `kwargs`), reporting every bad record at once.
 */
export function parseIfevalItems(text: string, file: string): IfevalItem[] {
  const items: IfevalItem[] = [];
  const problems: Problem[] = [];
  const keys = new Set<number>();
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const lineNumber = index + 1;
    const add = (path: string, message: string) => problems.push({ file, line: lineNumber, path, message });
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch (error) {
      add('', `not valid JSON (${(error as Error).message}); each line must be one JSON object`);
      return;
    }
    if (typeof record !== 'object' || record === null || Array.isArray(record))
      return add('', 'each line must be one JSON object');
    const { key, prompt, instruction_id_list: ids, kwargs } = record;
    if (!Number.isInteger(key)) add('key', 'must be an integer');
    else if (keys.has(key as number)) add('key', `duplicate key ${key as number}; keys must be unique`);
    if (typeof prompt !== 'string' || prompt.trim() === '') add('prompt', 'must be a non-empty string');
    if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string')) {
      return add('instruction_id_list', 'must be a non-empty list of instruction ids');
    }
    if (!Array.isArray(kwargs) || kwargs.length !== ids.length) {
      return add('kwargs', `must be a list with one object per instruction (${ids.length})`);
    }
    const before = problems.length;
    ids.forEach((id, position) => {
      for (const message of validateInstructionSpec(id, kwargs[position])) add(`kwargs[${position}]`, message);
    });
    if (problems.length > before || typeof prompt !== 'string' || !Number.isInteger(key)) return;
    keys.add(key as number);
    const copies = (kwargs as Record<string, unknown>[]).map((entry) => ({ ...(entry ?? {}) }));
    items.push({ key: key as number, prompt, instructionIds: [...ids], kwargs: copies });
  });
  if (problems.length > 0)
    throw new ValidationError('IFEVAL_BAD_DATA', `${file} has ${problems.length} problem(s)`, problems);
  return items;
}

let cached: IfevalItem[] | undefined;

/** The 541 shipped IFEval prompts, validated (a fresh copy each call). */
export function loadIfevalItems(): IfevalItem[] {
  if (!cached) {
    const file = join(ifevalDataDirectory(), 'input_data.jsonl');
    cached = parseIfevalItems(readFileSync(file, 'utf8'), file);
  }
  return cached.map((item) => ({
    ...item,
    instructionIds: [...item.instructionIds],
    kwargs: item.kwargs.map((kwargs) => ({ ...kwargs })),
  }));
}
