import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { StageDeps } from './define-stage';
import { decodeUtf8Strict } from '../../shared/artifacts/utf8';
import { BadInputError, HatError } from '../../shared/errors';
import type { ChatTokenizer } from '../../shared/text/chat-tokenizer';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import type { TokenizerSource } from '../../shared/text/tokenizer-source-config';

/** The text of a chat template override: an `s3://` or `file://` URI (through the store), or a local path. */
export async function readChatTemplate(
  location: string,
  openObject: StageDeps['openObject'],
  field = 'tokenizer.chatTemplate',
): Promise<string> {
  try {
    // A byte that is not UTF-8 would be rendered as U+FFFD into every sample: refused (BAD_ENCODING).
    if (/^(s3|file):\/\//.test(location)) {
      const { store, key } = openObject(location);
      return decodeUtf8Strict(await store.getBuffer(key), location);
    }
    return decodeUtf8Strict(await readFile(path.resolve(location)), location);
  } catch (error) {
    // A missing or unreadable object is bad input: say which field named it. Storage faults stay retryable.
    if (error instanceof BadInputError)
      throw new BadInputError(error.code, `${field}: ${error.message.replace(/^\[[A-Z_]+\] /, '')}`, { cause: error });
    if (HatError.isInstance(error)) throw error;
    throw new BadInputError(
      'MISSING_INPUT',
      `${field}: cannot read ${location} (${(error as Error).message}); give a .jinja file path or URI`,
      { cause: error },
    );
  }
}

/**
 * Loads the tokenizer a stage config names (tokenizerSourceSchema): the preset or model
 * directory, the chat template override read through the store, the hook-message form.
 * `field` names the config field in errors (`student.tokenizer`).
 */
export async function loadTokenizerSource(
  source: TokenizerSource | undefined,
  openObject: StageDeps['openObject'],
  field = 'tokenizer',
): Promise<ChatTokenizer> {
  const { preset, modelDir, chatTemplate, hookMessages } = source ?? {};
  return loadChatTokenizer({
    ...(modelDir !== undefined ? { modelDir } : { preset: preset ?? 'qwen3' }),
    ...(chatTemplate !== undefined
      ? {
          chatTemplate: await readChatTemplate(chatTemplate, openObject, `${field}.chatTemplate`),
          chatTemplateName: chatTemplate,
        }
      : {}),
    ...(hookMessages !== undefined ? { hookMessages } : {}),
  });
}
