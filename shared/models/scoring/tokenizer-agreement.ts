import { BadInputError, HatError } from '../../errors';
import type { ChatTokenizer } from '../../text/chat-tokenizer';
import type { TokenScorer } from './token-scorer';

/**
 * Teacher scores are only meaningful when the teacher reads the student's token ids as the same
 * text: the two vocabularies must agree id for id. A local tokenizer's fingerprint settles that
 * at once; a server's tokenizer is probed through its scoring endpoint (vLLM `decoded_token`,
 * SGLang `return_text_in_logprobs`) on ids that cover ordinary text, CJK, emoji, the chat
 * template's special tokens and the student's highest id.
 */

/** How the teacher's tokenizer was found to agree with the student's. */
export interface TokenizerAgreement {
  /** The fingerprint both sides share (the student's; the teacher's equals it or decodes the probe identically). */
  fingerprint: string;
  /** `fingerprint`: compared with a local or configured teacher fingerprint; `probe`: the server decoded the probe ids as the student does. */
  verifiedBy: Array<'fingerprint' | 'probe'>;
  /** Distinct probe ids whose texts were compared (0 without a probe). */
  probedTokens: number;
}

export interface TokenizerSide {
  /** e.g. `student onnx model /models/qwen3-0.6b`. */
  label: string;
  fingerprint?: string;
}

const probeText = 'Tokenizer probe: Hello, world! 你好，世界。直播间 12345 naïve café 🙂 {"a": [1, 2]}';

/** Most differing ids quoted in an error. */
const quotedDifferences = 3;

/**
 * Refuses a student/teacher pair whose tokenizers differ (BadInputError `TOKENIZER_MISMATCH`
 * naming both fingerprints and what to do), or a server teacher whose tokenizer cannot be
 * checked at all (`TOKENIZER_UNVERIFIED`). Local (in-process) teachers, which have no `probe`, are
 * compared by fingerprint; server teachers by a configured fingerprint when given, and always by
 * the probe.
 */
export async function checkTokenizerAgreement(options: {
  student: TokenizerSide & { tokenizer: ChatTokenizer };
  /** A scorer or a served sampler: without `probe` (an in-process model) its fingerprint is all there is to compare. */
  teacher: TokenizerSide & { scorer: Pick<TokenScorer, 'probe'> };
  signal?: AbortSignal;
}): Promise<TokenizerAgreement> {
  const { student, teacher } = options;
  const studentFingerprint = student.tokenizer.fingerprint;
  const verifiedBy: TokenizerAgreement['verifiedBy'] = [];
  const mismatch = (detail: string): BadInputError =>
    new BadInputError(
      'TOKENIZER_MISMATCH',
      `${student.label} (tokenizer fingerprint ${studentFingerprint}) and ${teacher.label} (tokenizer fingerprint ${teacher.fingerprint ?? 'unknown'}) do not share a tokenizer: ${detail}. ` +
        "Teacher logprobs of the student's token ids would score different text. Pick a teacher with the student's tokenizer (same vocabulary and added tokens, e.g. the same model family), or a student with the teacher's.",
      { details: { studentFingerprint, teacherFingerprint: teacher.fingerprint } },
    );
  if (teacher.fingerprint !== undefined) {
    if (teacher.fingerprint !== studentFingerprint) throw mismatch('their fingerprints differ');
    verifiedBy.push('fingerprint');
  }
  const probe = teacher.scorer.probe?.bind(teacher.scorer);
  if (probe === undefined) {
    if (verifiedBy.length === 0)
      throw new BadInputError(
        'TOKENIZER_UNVERIFIED',
        `${teacher.label} cannot be asked how it decodes token ids and no tokenizer fingerprint was given, so its vocabulary cannot be checked against ${student.label}'s (fingerprint ${studentFingerprint}); name its tokenizer in the config`,
      );
    return { fingerprint: studentFingerprint, verifiedBy, probedTokens: 0 };
  }

  const tokenizer = student.tokenizer;
  const probeIds = [
    ...tokenizer.encode(
      tokenizer.render([{ role: 'user', content: probeText }], { addGenerationPrompt: true, now: new Date(0) }),
    ),
    tokenizer.vocabSize - 1,
  ];
  let served;
  try {
    served = await probe(probeIds, options.signal);
  } catch (error) {
    if (HatError.isInstance(error) && error.code === 'MODEL_BAD_REQUEST') {
      throw mismatch(
        `the server refused the probe token ids (the highest is ${tokenizer.vocabSize - 1}, the student's largest id), so its vocabulary is smaller: ${error.message}`,
      );
    }
    throw error;
  }
  const differences = new Map<number, string>();
  const compared = new Set<number>();
  probeIds.forEach((tokenId, index) => {
    const servedText = served.texts[index];
    const localText = tokenizer.decode([tokenId]);
    // A lone piece of a multi-byte character decodes to U+FFFD on both sides: nothing to compare.
    if (servedText === null || servedText === undefined || localText.includes('\uFFFD')) return;
    compared.add(tokenId);
    if (servedText !== localText)
      differences.set(
        tokenId,
        `id ${tokenId} is ${JSON.stringify(localText)} for the student but ${JSON.stringify(servedText)} on the server`,
      );
  });
  if (differences.size > 0) {
    throw mismatch(
      `the server decodes ${differences.size} of ${compared.size} distinct probe token ids differently (${[...differences.values()].slice(0, quotedDifferences).join('; ')})`,
    );
  }
  if (compared.size > 0) verifiedBy.push('probe');
  if (verifiedBy.length === 0) {
    throw new BadInputError(
      'TOKENIZER_UNVERIFIED',
      `${teacher.label} reported no token texts for the tokenizer probe and no teacher tokenizer fingerprint was configured, so its vocabulary cannot be checked against the student's (fingerprint ${studentFingerprint}); set the teacher's tokenizerFingerprint (or tokenizer) in the config`,
    );
  }
  return { fingerprint: studentFingerprint, verifiedBy, probedTokens: compared.size };
}
