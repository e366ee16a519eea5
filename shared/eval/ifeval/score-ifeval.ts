import type { IfevalItemResult, IfevalScores } from './ifeval-types';

function percent(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}

/**
 * The four IFEval figures in percent: prompt-level (share of items whose instructions are all
 * followed) and instruction-level (share of all instructions followed, pooled over items), strict
 * and loose; plus, per instruction type, how many instructions there were and how many were followed.
 */
export function scoreIfeval(results: IfevalItemResult[]): IfevalScores {
  let instructions = 0;
  let instructionsStrict = 0;
  let instructionsLoose = 0;
  const perInstruction: IfevalScores['perInstruction'] = {};
  for (const result of results) {
    result.instructionIds.forEach((id, index) => {
      const entry = (perInstruction[id] ??= { count: 0, strict: 0, loose: 0 });
      entry.count += 1;
      instructions += 1;
      if (result.strict[index]) {
        entry.strict += 1;
        instructionsStrict += 1;
      }
      if (result.loose[index]) {
        entry.loose += 1;
        instructionsLoose += 1;
      }
    });
  }
  return {
    count: results.length,
    promptStrict: percent(results.filter((result) => result.followedStrict).length, results.length),
    instructionStrict: percent(instructionsStrict, instructions),
    promptLoose: percent(results.filter((result) => result.followedLoose).length, results.length),
    instructionLoose: percent(instructionsLoose, instructions),
    perInstruction,
  };
}
