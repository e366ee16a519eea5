import type { Tokenizer } from '@huggingface/tokenizers';

/**
 * The BPE word cache of @huggingface/tokenizers is an LRU over one Map that deletes and
 * re-inserts the key on every hit; on rendered chat text (a few hundred thousand word lookups a
 * second, nearly all hits) that bookkeeping alone cost about a sixth of a shard part's time in
 * the load profile, and its 10,000 entries are fewer than the distinct words of a day's logs.
 * This cache keeps two generations instead: a hit in the young one is one Map lookup, a hit in
 * the old one moves the word to the young one, and when the young one is full it becomes the old
 * one (the words not used for a whole generation are dropped). It only remembers results, so
 * encodings are unchanged; `shared/text/word-cache.test.ts` compares ids with the stock cache.
 */
/** V8 keeps a substring this long or longer as a view into the string it was cut from. */
const slicedStringMinimum = 13;

/**
 * `text` with characters of its own. A substring of 13 or more characters (slice, a regex match)
 * is, in V8, a view that keeps the whole string it was cut from alive: a cache that kept such a
 * word or segment as a key kept the whole rendered conversation it came from, so a tokenizer's
 * caches held up to one conversation per entry (about 20 KB instead of a few bytes) and a worker
 * grew by gigabytes over a 100,000-task shard stage (bench/load-100k.ts). Copying costs about a
 * microsecond for a few hundred characters, paid only when a cache takes a new key.
 */
export function ownString(text: string): string {
  return text.length < slicedStringMinimum ? text : Buffer.from(text, 'utf16le').toString('utf16le');
}

export class GenerationalWordCache<V> {
  private young = new Map<string, V>();
  private old = new Map<string, V>();

  constructor(readonly capacity: number) {}

  get(key: string): V | undefined {
    const value = this.young.get(key);
    if (value !== undefined) return value;
    const aged = this.old.get(key);
    if (aged !== undefined) this.put(key, aged);
    return aged;
  }

  put(key: string, value: V): void {
    if (this.young.size >= this.capacity) {
      this.old = this.young;
      this.young = new Map();
    }
    // The caller's key may be a view into a whole text (see ownString).
    this.young.set(ownString(key), value);
  }

  clear(): void {
    this.young.clear();
    this.old.clear();
  }

  get size(): number {
    return this.young.size + this.old.size;
  }
}

/** Words per generation: two generations of BPE results of words up to 256 characters stay well under 100 MB. */
export const wordCacheGeneration = 100_000;

interface CachingModel {
  cache?: { get(key: string): unknown; put(key: string, value: unknown): void; clear(): void };
}

/**
 * Swaps the tokenizer model's word cache for a GenerationalWordCache when the model has one of the
 * shape this library version uses (BPE); other models are left alone. Returns whether it did.
 */
export function useGenerationalWordCache(tokenizer: Tokenizer, capacity = wordCacheGeneration): boolean {
  const model = (tokenizer as unknown as { model?: CachingModel | null }).model;
  const cache = model?.cache;
  if (!model || !cache || typeof cache.get !== 'function' || typeof cache.put !== 'function') return false;
  model.cache = new GenerationalWordCache<unknown>(capacity);
  return true;
}
