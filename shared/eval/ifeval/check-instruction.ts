import type { IfevalMode } from './ifeval-types';

/** Whether `response` follows one instruction (strict: as it is; loose: any of its eight variants). */
export function checkInstruction(instructionId: string, kwargs: Record<string, unknown>, prompt: string, response: string, mode: IfevalMode): boolean {
  void instructionId;
  void kwargs;
  void prompt;
  void response;
  void mode;
  throw new Error('not implemented yet');
}

/** Problems of one instruction spec (unknown id, missing or ill-typed parameters); empty when usable. */
export function validateInstructionSpec(instructionId: string, kwargs: unknown): string[] {
  void instructionId;
  void kwargs;
  return ['not implemented yet'];
}
