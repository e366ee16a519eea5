import { Rng } from './rng';

describe('Rng', () => {
  it('gives the same stream for the same seed and a different one for another seed', () => {
    const a = new Rng('seed-1');
    const b = new Rng('seed-1');
    const c = new Rng('seed-2');
    const first = Array.from({ length: 5 }, () => a.nextUint32());
    expect(Array.from({ length: 5 }, () => b.nextUint32())).toEqual(first);
    expect(Array.from({ length: 5 }, () => c.nextUint32())).not.toEqual(first);
  });

  it('forks independent streams without advancing the parent', () => {
    const parent = new Rng(7);
    const before = new Rng(7).next();
    const child = parent.fork('x');
    expect(child.next()).not.toBe(before);
    expect(parent.next()).toBe(before);
  });

  it('draws integers within bounds and covers them', () => {
    const rng = new Rng('ints');
    const seen = new Set<number>();
    for (let i = 0; i < 1000; i++) {
      const value = rng.int(3, 7);
      expect(value).toBeGreaterThanOrEqual(3);
      expect(value).toBeLessThanOrEqual(7);
      seen.add(value);
    }
    expect([...seen].sort()).toEqual([3, 4, 5, 6, 7]);
  });
});
