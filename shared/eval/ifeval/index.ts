/**
 * IFEval (Zhou et al., 2023): the 541 shipped prompts, the 25 instruction checkers with the
 * reference semantics, and the benchmark's four figures. Public interface of the eval stage's
 * `ifeval` suite and of the `custom` suite's rule checks; keep these names stable.
 */
export type { IfevalItem, IfevalItemResult, IfevalScores, IfevalMode } from './ifeval-types';
export { IFEVAL_INSTRUCTION_IDS } from './instruction-ids';
export { loadIfevalItems, ifevalDataDirectory, parseIfevalItems } from './load-ifeval-items';
export { checkInstruction, validateInstructionSpec, looseResponseVariants, countWords } from './check-instruction';
export { checkIfevalResponse } from './check-ifeval-response';
export { scoreIfeval } from './score-ifeval';
export { countSentences, splitSentences } from './punkt-sentence-splitter';
export { detectLanguage } from './language-detector';
