/** One IFEval prompt: its instructions and, per instruction, the parameters the checker reads. */
export type IfevalItem = { key: number; prompt: string; instructionIds: string[]; kwargs: Record<string, unknown>[] };

/** strict checks the response as it is; loose accepts any of its eight variants (see looseResponseVariants). */
export type IfevalMode = 'strict' | 'loose';

/** Per-instruction outcomes of one response, in the order of `instructionIds`. */
export type IfevalItemResult = {
  key: number;
  instructionIds: string[];
  strict: boolean[];
  loose: boolean[];
  followedStrict: boolean;
  followedLoose: boolean;
};

/** The benchmark's four figures as percentages 0–100, plus per-instruction-type counts of followed instructions. */
export type IfevalScores = {
  count: number;
  promptStrict: number;
  instructionStrict: number;
  promptLoose: number;
  instructionLoose: number;
  perInstruction: Record<string, { count: number; strict: number; loose: number }>;
};
