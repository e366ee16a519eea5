import { checkInstructionOnVariants, looseResponseVariants } from './check-instruction';
import type { IfevalItem, IfevalItemResult } from './ifeval-types';

/** Checks every instruction of one item, strict (the response as it is) and loose (any of its eight variants). */
export function checkIfevalResponse(item: IfevalItem, response: string): IfevalItemResult {
  const variants = looseResponseVariants(response);
  const strict = item.instructionIds.map((id, index) =>
    checkInstructionOnVariants(id, item.kwargs[index] ?? {}, [response]),
  );
  // The first loose variant is the response itself: a strict pass is a loose pass.
  const loose = item.instructionIds.map(
    (id, index) => strict[index] || checkInstructionOnVariants(id, item.kwargs[index] ?? {}, variants.slice(1)),
  );
  return {
    key: item.key,
    instructionIds: [...item.instructionIds],
    strict,
    loose,
    followedStrict: strict.every(Boolean),
    followedLoose: loose.every(Boolean),
  };
}
