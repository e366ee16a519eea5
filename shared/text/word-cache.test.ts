import { GenerationalWordCache, useGenerationalWordCache } from './word-cache';
import { loadStockTokenizer, presetDirectory } from './load-chat-tokenizer';

const presetTokenizer = (preset: string) => loadStockTokenizer(presetDirectory(preset));

describe('GenerationalWordCache', () => {
  it('keeps the words of the last two generations and moves old hits to the young generation', () => {
    const cache = new GenerationalWordCache<number>(2);
    cache.put('a', 1);
    cache.put('b', 2);
    cache.put('c', 3); // a and b age
    expect(cache.get('a')).toBe(1); // promoted: c, a young
    cache.put('d', 4); // c, a age; b dropped
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('c')).toBe(3);
    expect(cache.get('a')).toBe(1);
    expect(cache.size).toBeLessThanOrEqual(4);
  });

  it('gives the same ids as the stock word cache, with a generation small enough to turn over many times', async () => {
    const stock = await presetTokenizer('qwen3');
    const tuned = await presetTokenizer('qwen3');
    expect(useGenerationalWordCache(tuned, 50)).toBe(true);
    const words = ['price', 'Preis', '价格', 'naïve', 'emoji 🎉🎉', '  indented', 'snake_case_name', 'x'.repeat(300)];
    const texts = Array.from({ length: 200 }, (_, index) =>
      Array.from({ length: 12 }, (__, offset) => `${words[(index * 7 + offset) % words.length]}${index % 13}`).join(
        offset(index),
      ),
    );
    for (const text of texts)
      expect(tuned.encode(text, { add_special_tokens: false }).ids).toEqual(
        stock.encode(text, { add_special_tokens: false }).ids,
      );
  });
});

function offset(index: number): string {
  return [' ', '\n', ', ', '\t'][index % 4];
}
