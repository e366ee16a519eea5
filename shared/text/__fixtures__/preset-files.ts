import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { tokenizerPresets, type TokenizerPreset } from '../load-chat-tokenizer';

export const presetNames = Object.keys(tokenizerPresets) as TokenizerPreset[];

/** A preset's own files, read straight from its package, for checks independent of loadChatTokenizer. */
export function presetFiles(preset: TokenizerPreset): { directory: string; tokenizerJson: Record<string, unknown>; config: Record<string, unknown> } {
  const directory = path.dirname(require.resolve(`${tokenizerPresets[preset]}/models/tokenizer.json`));
  return {
    directory,
    tokenizerJson: JSON.parse(readFileSync(path.join(directory, 'tokenizer.json'), 'utf8')) as Record<string, unknown>,
    config: JSON.parse(readFileSync(path.join(directory, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>,
  };
}

/** The package's own tokenizer, built directly with @huggingface/tokenizers. */
export function presetTokenizer(preset: TokenizerPreset): Tokenizer {
  const files = presetFiles(preset);
  return new Tokenizer(files.tokenizerJson, files.config);
}
