import { createHash } from 'node:crypto';

/**
 * Seeded pseudo-random generator (xoshiro128**). Every random choice in the project takes one
 * of these, so the same inputs and seed give byte-identical artifacts. `fork(label)` derives an
 * independent stream from a label, so adding a random draw in one place does not shift another.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  readonly seed: string;

  constructor(seed: string | number) {
    this.seed = String(seed);
    const digest = createHash('sha256').update(this.seed).digest();
    this.s0 = digest.readUInt32LE(0) | 0;
    this.s1 = digest.readUInt32LE(4) | 0;
    this.s2 = digest.readUInt32LE(8) | 0;
    this.s3 = digest.readUInt32LE(12) | 0;
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** Next unsigned 32-bit integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform float in [0, 1) with 53 bits of randomness. */
  next(): number {
    const high = this.nextUint32() >>> 5;
    const low = this.nextUint32() >>> 6;
    return (high * 67108864 + low) / 9007199254740992;
  }

  /** Uniform integer in [min, max] (inclusive). */
  int(min: number, max: number): number {
    if (max < min) throw new RangeError(`Rng.int: max ${max} < min ${min}`);
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Rng.pick: empty list');
    return items[Math.floor(this.next() * items.length)];
  }

  /** Picks by non-negative weights. */
  weighted<T>(items: readonly T[], weights: readonly number[]): T {
    const total = weights.reduce((sum, w) => sum + Math.max(0, w), 0);
    if (items.length === 0 || total <= 0) throw new RangeError('Rng.weighted: no positive weight');
    let roll = this.next() * total;
    for (let i = 0; i < items.length; i++) {
      roll -= Math.max(0, weights[i] ?? 0);
      if (roll < 0) return items[i];
    }
    return items[items.length - 1];
  }

  /** Returns a shuffled copy (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const copy = items.slice();
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [copy[i], copy[j]] = [copy[j], copy[i]];
    }
    return copy;
  }

  /** k distinct items, in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    return this.shuffle(items).slice(0, Math.max(0, Math.min(k, items.length)));
  }

  /** Standard normal (Box-Muller). */
  normal(mean = 0, std = 1): number {
    const u = 1 - this.next();
    const v = this.next();
    return mean + std * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Exponential with the given rate. */
  exponential(rate: number): number {
    return -Math.log(1 - this.next()) / rate;
  }

  /** Independent generator derived from this one's seed and a label (does not advance this one). */
  fork(label: string | number): Rng {
    return new Rng(`${this.seed}/${label}`);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
