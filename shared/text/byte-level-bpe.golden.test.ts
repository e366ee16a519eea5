import fc from 'fast-check';
import { Tokenizer } from '@huggingface/tokenizers';
import { ByteLevelBpe } from './byte-level-bpe';
import { presetDirectory, readTokenizerFiles } from './load-chat-tokenizer';
import { toolSession } from './__fixtures__/sample-conversations';

async function both(preset: string) {
  const { tokenizerJson, tokenizerConfig } = await readTokenizerFiles(presetDirectory(preset));
  const stock = new Tokenizer(tokenizerJson, tokenizerConfig);
  return { stock, fast: ByteLevelBpe.fromTokenizer(stock, tokenizerJson), tokenizerJson };
}

/** Pieces that exercise the split pattern, NFC and byte merges: scripts, digits, whitespace runs, contractions, combining marks, emoji. */
const pieces = [
  '直播间',
  '优惠券满300减50',
  '，',
  '。',
  '？',
  'Hello',
  ' world',
  "'s",
  "'LL",
  "'Re",
  ' ',
  '  ',
  '\t',
  '\n',
  '\r\n',
  '\n\n\n',
  '   \n',
  '12345',
  '3.14',
  'e\u0301',
  '\u1100\u1161\u11a8',
  '🛍️',
  '👨‍👩‍👧',
  '{"item_id": "A1", "price": 109}',
  '<b>x</b>',
  'ΑΒΓ',
  'naïve',
  '\u00a0',
  '\u2028',
  '\ufeff',
];

describe('byte-level BPE on ids', () => {
  for (const preset of ['qwen3', 'llama3_1']) {
    describe(preset, () => {
      let tokenizers: Awaited<ReturnType<typeof both>>;
      beforeAll(async () => {
        tokenizers = await both(preset);
      });

      it('applies to the tokenizer', () => {
        expect(tokenizers.fast).toBeDefined();
      });

      it('gives the library’s ids for any mix of scripts, digits, whitespace and marks', () => {
        fc.assert(
          fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 40 }), (parts) => {
            const text = parts.join('');
            expect(tokenizers.fast!.encode(text)).toEqual(
              tokenizers.stock.encode(text, { add_special_tokens: false }).ids,
            );
          }),
          { numRuns: 1500 },
        );
      });

      it('gives the library’s ids for arbitrary Unicode text', () => {
        fc.assert(
          fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), fc.string({ maxLength: 30 }), (a, b) => {
            const text = a + b;
            expect(tokenizers.fast!.encode(text)).toEqual(
              tokenizers.stock.encode(text, { add_special_tokens: false }).ids,
            );
          }),
          { numRuns: 1500 },
        );
      });

      it('gives the library’s ids on long words (thousands of bytes merged in one piece) and repeated calls (cache)', () => {
        const texts = [
          '一'.repeat(3000),
          'a'.repeat(5000),
          JSON.stringify(toolSession.tools),
          ...toolSession.messages.map((message) => String(message.content ?? '')),
        ];
        for (let round = 0; round < 2; round++)
          for (const text of texts)
            expect(tokenizers.fast!.encode(text)).toEqual(
              tokenizers.stock.encode(text, { add_special_tokens: false }).ids,
            );
      });
    });
  }

  it('does not apply where the tokenizer is of another shape (DeepSeek-V3: several split patterns)', async () => {
    expect((await both('deepseek_v3')).fast).toBeUndefined();
  });
});
