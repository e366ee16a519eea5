import { Tokenizer } from '@huggingface/tokenizers';
import { sha256Hex } from '../../hash/hash';
import { readTokenizerDirectory, specialTokenContent } from './tokenizer-source';

/**
 * What the ONNX backend needs from a tokenizer. Kept this small so the backend can switch to
 * shared/text's chat tokenizer without touching the generation code.
 */
export interface DecoderTokenizer {
  encode(text: string): number[];
  /** Text of token ids; special tokens (e.g. `<|im_end|>`) are dropped unless `keepSpecialTokens`. */
  decode(tokenIds: readonly number[], options?: { keepSpecialTokens?: boolean }): string;
  /** Text of one token as the vocabulary spells it after decoding (special tokens included). */
  tokenText(tokenId: number): string;
  /** Id of a token string (special or not), when the vocabulary has it. */
  tokenId(token: string): number | undefined;
  /** Special token strings from tokenizer_config.json. */
  readonly specialTokens: { bos?: string; eos?: string; pad?: string; unk?: string };
  /** sha256 of tokenizer.json: two models can share token ids only when these match. */
  readonly fingerprint: string;
}

/**
 * Loads tokenizer.json and tokenizer_config.json from a model directory with
 * @huggingface/tokenizers. Text is encoded without added special tokens: the chat template
 * already writes every special token the model expects.
 */
export function loadDecoderTokenizer(
  directory: string,
): DecoderTokenizer & { tokenizerConfig: Record<string, unknown> } {
  const files = readTokenizerDirectory(directory);
  const tokenizer = new Tokenizer(files.tokenizer, files.tokenizerConfig);
  const tokenString = (field: string): string | undefined => specialTokenContent(files.tokenizerConfig, field);
  return {
    tokenizerConfig: files.tokenizerConfig,
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    decode: (tokenIds, options) => tokenizer.decode(tokenIds, { skip_special_tokens: !options?.keepSpecialTokens }),
    tokenText: (tokenId) => tokenizer.decode([tokenId], { skip_special_tokens: false }),
    tokenId: (token) => tokenizer.token_to_id(token),
    specialTokens: {
      bos: tokenString('bos_token'),
      eos: tokenString('eos_token'),
      pad: tokenString('pad_token'),
      unk: tokenString('unk_token'),
    },
    fingerprint: sha256Hex(files.text?.tokenizer ?? JSON.stringify(files.tokenizer)),
  };
}
