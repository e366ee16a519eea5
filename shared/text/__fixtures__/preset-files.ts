import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { tokenizerPresets, type TokenizerPreset } from '../load-chat-tokenizer';

export const presetNames = Object.keys(tokenizerPresets) as TokenizerPreset[];

/**
 * A preset's own files, read straight from its package, for checks independent of
 * loadChatTokenizer. tokenizer.json (megabytes) is parsed on first access: most callers want only
 * the config or the directory. Every call reads afresh, so callers may change what they get.
 */
export function presetFiles(preset: TokenizerPreset): {
  directory: string;
  tokenizerJson: Record<string, unknown>;
  config: Record<string, unknown>;
} {
  const directory = path.dirname(require.resolve(`${tokenizerPresets[preset]}/models/tokenizer.json`));
  let tokenizerJson: Record<string, unknown> | undefined;
  return {
    directory,
    get tokenizerJson() {
      tokenizerJson ??= JSON.parse(readFileSync(path.join(directory, 'tokenizer.json'), 'utf8')) as Record<
        string,
        unknown
      >;
      return tokenizerJson;
    },
    config: JSON.parse(readFileSync(path.join(directory, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>,
  };
}

const builtTokenizers = new Map<TokenizerPreset, Tokenizer>();

/** The package's own tokenizer, built directly with @huggingface/tokenizers (once per preset and test file). */
export function presetTokenizer(preset: TokenizerPreset): Tokenizer {
  let tokenizer = builtTokenizers.get(preset);
  if (!tokenizer) {
    const files = presetFiles(preset);
    tokenizer = new Tokenizer(files.tokenizerJson, files.config);
    builtTokenizers.set(preset, tokenizer);
  }
  return tokenizer;
}
