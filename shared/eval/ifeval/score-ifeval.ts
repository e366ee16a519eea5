import type { IfevalItemResult, IfevalScores } from './ifeval-types';

/** The four IFEval figures (percent) over item results. */
export function scoreIfeval(results: IfevalItemResult[]): IfevalScores {
  void results;
  return { count: 0, promptStrict: 0, instructionStrict: 0, promptLoose: 0, instructionLoose: 0, perInstruction: {} };
}
