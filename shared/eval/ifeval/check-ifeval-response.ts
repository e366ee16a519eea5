import { checkInstruction } from './check-instruction';
import type { IfevalItem, IfevalItemResult } from './ifeval-types';

/** The loose variants of a response, in the reference order (the original first). */
export function looseResponseVariants(response: string): string[] {
  return [response];
}

/** Checks every instruction of one item, strict and loose. */
export function checkIfevalResponse(item: IfevalItem, response: string): IfevalItemResult {
  const strict = item.instructionIds.map((id, index) => checkInstruction(id, item.kwargs[index] ?? {}, item.prompt, response, 'strict'));
  const loose = item.instructionIds.map((id, index) => checkInstruction(id, item.kwargs[index] ?? {}, item.prompt, response, 'loose'));
  return { key: item.key, instructionIds: [...item.instructionIds], strict, loose, followedStrict: strict.every(Boolean), followedLoose: loose.every(Boolean) };
}
