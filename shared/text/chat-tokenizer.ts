import { createHash } from 'node:crypto';
import { Tokenizer } from '@huggingface/tokenizers';
import { ChatTemplate, type ChatTemplateSource, type RenderOptions } from './chat-template';
import {
  hookMessageFormFor,
  probeSystemMessagePlacement,
  type HookMessageForm,
  type SystemMessagePlacement,
} from './hook-messages';
import { SegmentedEncoder, type EncodedText } from './segmented-encoder';
import { probeTemplateFeatures, type TemplateFeatures } from './template-features';
import type { TemplateMessage } from './template-input';
import { useGenerationalWordCache } from './word-cache';

/** A target model's tokenizer together with its own chat template. */
export interface ChatTokenizer {
  /** Preset name or model directory name. */
  name: string;
  /**
   * The chat template in words, to name it in messages after "the chat template": `of qwen3` (a
   * preset's own), `of /models/x` (a model directory's own), or the name given with a template
   * override (its file), else `given as text (sha256 …)`.
   */
  templateLabel: string;
  /** The thinking switches the template reads (`enable_thinking`, `thinking`); empty: `enableThinking` changes nothing. */
  thinkingSwitches: string[];
  /** sha256 over the vocabulary (id → token, by id) and the added tokens; equal fingerprints mean interchangeable token ids. */
  fingerprint: string;
  /** sha256 of the chat template text (see `ChatTemplate.hash`). */
  templateHash: string;
  /** Token ids of `text`; special-token text (`<|im_start|>`) becomes its special id, and no BOS/EOS is added. */
  encode(text: string): number[];
  /**
   * The ids `encode(text)` gives, plus the index of the token that starts at each of `offsets`
   * (-1 where an offset falls inside a token). Remembers segments of text it has encoded
   * (system prompts, tool definitions), so on rendered SFT conversations it is much faster than
   * `encode`; see SegmentedEncoder for why the ids are the same.
   */
  encodeAt(text: string, offsets: readonly number[]): EncodedText;
  /** Text of `ids`, special tokens included, without clean-up of spaces. */
  decode(ids: number[]): string;
  /** The chat template rendered with the variables serving passes. */
  render(messages: TemplateMessage[], options: RenderOptions): string;
  /** What the generation prompt appends for these options when the template makes it the same for every conversation, else undefined (see ChatTemplate.generationPrompt). */
  generationPrompt(options: RenderOptions): string | undefined;
  /** The tokenizer's `eos_token` id, when it has one. */
  eosTokenId?: number;
  /** The tokenizer's `pad_token` id, when it has one (packed sequences pad with it, else with eos). */
  padTokenId?: number;
  /** One more than the largest token id (vocabulary plus added tokens). */
  vocabSize: number;
  /** Texts of the added tokens marked special. */
  specialTokens: string[];
  /** Texts of all added tokens, special or not (Qwen's `<think>` and `<tool_call>` are not special). */
  addedTokens: string[];
  /** Texts that end an assistant turn: `eos_token` plus generation_config.json's `eos_token_id` entries. */
  endOfTurnTokens: string[];
  /** What the template does with tools (probed once at load). */
  templateFeatures: TemplateFeatures;
  /** How hook system messages reach this template (probed at load unless configured); see normalizeHookMessages. */
  hookMessages: HookMessageForm;
  /** Where the template puts a system message that is not first (probed at load). */
  systemMessagePlacement: SystemMessagePlacement;
  /** The text normalization `encode` applies first (NFC for Qwen); decoding returns normalized text. */
  normalize(text: string): string;
}

/** The parts of a tokenizer that do not depend on the chat template, built once per model directory. */
export interface TokenizerCore {
  tokenizer: Tokenizer;
  /** Parsed tokenizer_config.json. */
  config: Record<string, unknown>;
  fingerprint: string;
  vocabSize: number;
  specialTokens: string[];
  addedTokens: string[];
  endOfTurnTokens: string[];
  eosTokenId?: number;
  padTokenId?: number;
  /** Segment-memoizing encoder shared by every template of this tokenizer. */
  segmentedEncoder: SegmentedEncoder;
}

/** A special-token entry of tokenizer_config.json: a string or an AddedToken object `{ content }`. */
export function specialTokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return undefined;
}

/** The special-token variables transformers passes to every template (its special_tokens_map). */
function specialTokenVariables(config: Record<string, unknown>): Record<string, unknown> {
  const variables: Record<string, unknown> = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const text = specialTokenText(config[key]);
    if (text !== undefined) variables[key] = text;
  }
  if (Array.isArray(config.additional_special_tokens)) {
    variables.additional_special_tokens = config.additional_special_tokens
      .map(specialTokenText)
      .filter((text) => text !== undefined);
  }
  return variables;
}

function fingerprintOf(tokenizer: Tokenizer): { fingerprint: string; vocabSize: number } {
  const vocabulary = [...tokenizer.get_vocab(true)]
    .map(([token, id]) => [id, token] as const)
    .sort((a, b) => a[0] - b[0]);
  const added = [...tokenizer.get_added_tokens_decoder()]
    .map(([id, token]) => [id, token.content, token.special] as const)
    .sort((a, b) => a[0] - b[0]);
  // One serialization, hashed in one call: per-entry hash updates cost ten times as much.
  const fingerprint = createHash('sha256').update(JSON.stringify({ vocabulary, added })).digest('hex');
  const largestId = Math.max(vocabulary.at(-1)?.[0] ?? -1, added.at(-1)?.[0] ?? -1);
  return { fingerprint, vocabSize: largestId + 1 };
}

/**
 * Parses tokenizer files. `endOfTurnIds` are generation_config.json's `eos_token_id` entries,
 * the ids serving stops on besides `eos_token`.
 */
export function createTokenizerCore(
  tokenizerJson: Record<string, unknown>,
  config: Record<string, unknown>,
  endOfTurnIds: number[] = [],
): TokenizerCore {
  const tokenizer = new Tokenizer(tokenizerJson, config);
  useGenerationalWordCache(tokenizer);
  // Hashing the whole vocabulary takes a quarter of a second at 150k tokens: done when first asked.
  let identity: { fingerprint: string; vocabSize: number } | undefined;
  const identityOf = () => (identity ??= fingerprintOf(tokenizer));
  const added = [...tokenizer.get_added_tokens_decoder().values()];
  const eosText = specialTokenText(config.eos_token);
  const padText = specialTokenText(config.pad_token);
  const endOfTurnTokens = [
    ...(eosText !== undefined ? [eosText] : []),
    ...endOfTurnIds.map((id) => tokenizer.id_to_token(id)).filter((text) => text !== undefined),
  ];
  return {
    tokenizer,
    config,
    get fingerprint() {
      return identityOf().fingerprint;
    },
    get vocabSize() {
      return identityOf().vocabSize;
    },
    specialTokens: added.filter((token) => token.special).map((token) => token.content),
    addedTokens: added.map((token) => token.content),
    endOfTurnTokens: [...new Set(endOfTurnTokens)],
    eosTokenId: eosText !== undefined ? tokenizer.token_to_id(eosText) : undefined,
    padTokenId: padText !== undefined ? tokenizer.token_to_id(padText) : undefined,
    segmentedEncoder: new SegmentedEncoder(tokenizer, tokenizerJson, config),
  };
}

/** Puts a tokenizer and a chat template together (probing what the template does with tools). */
export function createChatTokenizer(
  name: string,
  core: TokenizerCore,
  chatTemplate: ChatTemplateSource,
  hookMessages?: HookMessageForm,
  templateLabel = `of ${name}`,
): ChatTokenizer {
  const { tokenizer } = core;
  const template = new ChatTemplate(chatTemplate, specialTokenVariables(core.config));
  const render = (messages: TemplateMessage[], options: RenderOptions) => template.render(messages, options);
  const systemMessagePlacement = probeSystemMessagePlacement(render);
  return {
    name,
    templateLabel,
    thinkingSwitches: template.thinkingSwitches,
    get fingerprint() {
      return core.fingerprint;
    },
    templateHash: template.hash,
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    encodeAt: (text, offsets) => core.segmentedEncoder.encodeAt(text, offsets),
    decode: (ids) =>
      ids.length === 0
        ? ''
        : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
    render,
    generationPrompt: (options) => template.generationPrompt(options),
    eosTokenId: core.eosTokenId,
    padTokenId: core.padTokenId,
    get vocabSize() {
      return core.vocabSize;
    },
    specialTokens: core.specialTokens,
    addedTokens: core.addedTokens,
    endOfTurnTokens: core.endOfTurnTokens,
    templateFeatures: probeTemplateFeatures(render),
    hookMessages: hookMessages ?? hookMessageFormFor(systemMessagePlacement),
    systemMessagePlacement,
    normalize: (text) => (tokenizer.normalizer ? tokenizer.normalizer.normalize(text) : text),
  };
}
