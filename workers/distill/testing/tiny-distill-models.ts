import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeDummyDecoder } from '../../../shared/models/onnx/dummy-decoder';
import { resolveTokenizerFiles } from '../../../shared/models/onnx/tokenizer-source';

/** Directories of the tiny models distillation tests use. */
export interface TinyDistillModels {
  /** Byte tokenizer, 2 layers, hidden 16. */
  studentDir: string;
  /** Byte tokenizer (same fingerprint as the student), 2 layers, hidden 32. */
  teacherDir: string;
  /** A byte tokenizer whose ids of "a" and "e" are swapped: same size, different fingerprint. */
  mismatchedDir: string;
}

/**
 * Writes three random-weight decoders under `directory`: a student and a larger teacher sharing
 * the 282-token byte tokenizer, and a model whose tokenizer maps two letters to each other's ids
 * (so every check that compares vocabularies has something to find). Each takes well under a
 * second to make and to run.
 */
export function makeTinyDistillModels(directory: string): TinyDistillModels {
  const studentDir = join(directory, 'student');
  const teacherDir = join(directory, 'teacher');
  const mismatchedDir = join(directory, 'mismatched');
  makeDummyDecoder({ outDir: studentDir, tokenizer: 'bytes', layers: 2, hidden: 16, seed: 'student' });
  makeDummyDecoder({ outDir: teacherDir, tokenizer: 'bytes', layers: 2, hidden: 32, seed: 'teacher' });

  const files = resolveTokenizerFiles('bytes');
  const tokenizer = structuredClone(files.tokenizer) as { model: { vocab: Record<string, number> } };
  const vocab = tokenizer.model.vocab;
  [vocab.a, vocab.e] = [vocab.e, vocab.a];
  const tokenizerDir = join(directory, 'swapped-tokenizer');
  mkdirSync(tokenizerDir, { recursive: true });
  writeFileSync(join(tokenizerDir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(tokenizerDir, 'tokenizer_config.json'), JSON.stringify(files.tokenizerConfig));
  makeDummyDecoder({ outDir: mismatchedDir, tokenizer: tokenizerDir, layers: 2, hidden: 16, seed: 'mismatched' });
  return { studentDir, teacherDir, mismatchedDir };
}

/** A distill stage config over the tiny models: the shipped prompts, two samples each, a short answer. */
export function tinyDistillConfig(
  models: TinyDistillModels,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    prompts: [{ kind: 'builtin', limit: 4 }],
    student: { adapter: 'onnx', modelDir: models.studentDir, intraOpThreads: 1 },
    teacher: { adapter: 'onnx', modelDir: models.teacherDir, intraOpThreads: 1 },
    samplesPerPrompt: 2,
    sampling: { temperature: 1, maxNewTokens: 10 },
    teacherTopK: 3,
    promptsPerPart: 2,
    ...overrides,
  };
}
