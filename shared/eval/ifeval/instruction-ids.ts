/** The 25 instruction types of IFEval, as `instruction_id_list` names them. */
export const IFEVAL_INSTRUCTION_IDS = [
  'keywords:existence',
  'keywords:frequency',
  'keywords:forbidden_words',
  'keywords:letter_frequency',
  'language:response_language',
  'length_constraints:number_sentences',
  'length_constraints:number_paragraphs',
  'length_constraints:number_words',
  'length_constraints:nth_paragraph_first_word',
  'detectable_content:number_placeholders',
  'detectable_content:postscript',
  'detectable_format:number_bullet_lists',
  'detectable_format:constrained_response',
  'detectable_format:number_highlighted_sections',
  'detectable_format:multiple_sections',
  'detectable_format:json_format',
  'detectable_format:title',
  'combination:two_responses',
  'combination:repeat_prompt',
  'startend:end_checker',
  'change_case:capital_word_frequency',
  'change_case:english_capital',
  'change_case:english_lowercase',
  'punctuation:no_comma',
  'startend:quotation',
] as const;

export type IfevalInstructionId = (typeof IFEVAL_INSTRUCTION_IDS)[number];

const known = new Set<string>(IFEVAL_INSTRUCTION_IDS);

export function isIfevalInstructionId(value: string): value is IfevalInstructionId {
  return known.has(value);
}
