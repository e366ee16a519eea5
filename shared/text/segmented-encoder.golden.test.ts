import fc from 'fast-check';
import { presetFiles, presetNames } from './__fixtures__/preset-files';
import { sampleConversations } from './__fixtures__/sample-conversations';
import { createChatTokenizer, createTokenizerCore, type ChatTokenizer } from './chat-tokenizer';
import { loadChatTokenizer, type TokenizerPreset } from './load-chat-tokenizer';
import { trajectoryToTemplateInput } from './template-input';

const now = new Date(Date.UTC(2025, 0, 2));
const tokenizers = {} as Record<TokenizerPreset, ChatTokenizer>;

beforeAll(async () => {
  for (const preset of presetNames) tokenizers[preset] = await loadChatTokenizer({ preset });
});

/** The token index starting at each character offset, found the slow way: decoding every prefix of the ids. */
function boundariesByDecoding(tokenizer: ChatTokenizer, text: string, ids: number[]): Map<number, number> {
  const byPrefix = new Map<string, number>();
  for (let count = 0; count <= ids.length; count++) byPrefix.set(tokenizer.decode(ids.slice(0, count)), count);
  const found = new Map<number, number>();
  for (let offset = 0; offset <= text.length; offset++) {
    const index = byPrefix.get(tokenizer.normalize(text.slice(0, offset)));
    if (index !== undefined) found.set(offset, index);
  }
  return found;
}

const pieces = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom(
    '\n',
    '\n\n',
    ' \n',
    '。\n',
    '\t\n  ',
    '  ',
    'A1 玻尿酸精华',
    '😀🎁',
    '👩‍👩‍👧',
    'cafe\u0301',
    '\u0301',
    '#',
    '- id: x',
    '{"a": [1, 2]}',
    "'s",
    '123456',
  ),
  fc.constantFrom(
    '<|im_start|>',
    '<|im_end|>',
    '<think>',
    '</think>',
    '<tool_call>',
    '<|eot_id|>',
    '<｜end▁of▁sentence｜>',
    '<|begin_of_text|>',
  ),
);
const texts = fc.array(pieces, { maxLength: 10 }).map((parts) => parts.join(''));

describe('SegmentedEncoder', () => {
  test.each(presetNames)(
    '%s: ids equal the whole-text encoding, and offsets land where decoding says tokens start',
    (preset) => {
      const tokenizer = tokenizers[preset];
      fc.assert(
        fc.property(texts, (text) => {
          const offsets = Array.from({ length: text.length + 1 }, (_, offset) => offset);
          const { ids, tokenIndex } = tokenizer.encodeAt(text, offsets);
          expect(ids).toEqual(tokenizer.encode(text));
          const expected = boundariesByDecoding(tokenizer, text, ids);
          for (const offset of offsets) {
            // Decoding can prove a boundary only between whole characters; where it finds one, so must the encoder.
            if (expected.has(offset)) expect([offset, tokenIndex[offset]]).toEqual([offset, expected.get(offset)]);
            else expect([offset, tokenIndex[offset]]).toEqual([offset, -1]);
          }
        }),
        { numRuns: 60, seed: 11 },
      );
    },
  );

  // Runs of lines the memo has not seen are encoded in one call and split back by token bytes.
  const lineTexts = fc
    .array(fc.oneof(pieces, fc.constantFrom('{"item_id":"6000411","price":279,"stock":1800}', '  - 满300减50', 'ok')), {
      minLength: 2,
      maxLength: 12,
    })
    .chain((lines) =>
      fc
        .array(fc.constantFrom('\n', '\n\n', ' \n', '\r\n'), { minLength: lines.length, maxLength: lines.length })
        .map((breaks) => lines.map((line, index) => `${line}${breaks[index]}`).join('')),
    );
  test.each(presetNames)(
    '%s: many unseen lines at once give the whole-text ids, then the same ids from memory',
    (preset) => {
      const tokenizer = tokenizers[preset];
      fc.assert(
        fc.property(lineTexts, (text) => {
          const expected = tokenizer.encode(text);
          expect(tokenizer.encodeAt(text, []).ids).toEqual(expected);
          expect(tokenizer.encodeAt(text, [text.length]).ids).toEqual(expected);
          expect(tokenizer.encodeAt(`x${text}`, []).ids).toEqual(tokenizer.encode(`x${text}`));
        }),
        { numRuns: 150, seed: 23 },
      );
    },
  );

  test.each(presetNames)(
    '%s: rendered conversations encode to the same ids, the first time and from memory',
    (preset) => {
      const tokenizer = tokenizers[preset];
      for (const conversation of sampleConversations) {
        const input = trajectoryToTemplateInput(conversation.messages, conversation.tools, tokenizer.templateFeatures);
        const text = tokenizer.render(input.messages, { tools: input.tools, now });
        const expected = tokenizer.encode(text);
        expect(tokenizer.encodeAt(text, []).ids).toEqual(expected);
        expect(tokenizer.encodeAt(text, [0, text.length])).toEqual({ ids: expected, tokenIndex: [0, expected.length] });
      }
    },
  );

  test('a tokenizer whose added tokens strip their neighbours is encoded whole, with the same results', () => {
    const files = presetFiles('qwen3');
    const stripping = structuredClone(files.tokenizerJson) as {
      added_tokens: Array<{ content: string; lstrip: boolean }>;
    };
    stripping.added_tokens.find((token) => token.content === '<think>')!.lstrip = true;
    const core = createTokenizerCore(stripping, files.config);
    expect(core.segmentedEncoder.wholeTextReason).toContain('strips');
    const tokenizer = createChatTokenizer('qwen3-lstrip', core, files.config.chat_template as string);
    for (const text of ['plain text', 'keep  <think>\nhmm</think> answer', 'a\n\nb']) {
      const offsets = [0, 5, text.length];
      const { ids, tokenIndex } = tokenizer.encodeAt(text, offsets);
      expect(ids).toEqual(tokenizer.encode(text));
      const expected = boundariesByDecoding(tokenizer, text, ids);
      expect(tokenIndex).toEqual(offsets.map((offset) => expected.get(offset) ?? -1));
    }
  });
});
