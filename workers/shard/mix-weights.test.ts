import { copiesFor } from './mix-weights';

describe('copiesFor', () => {
  test('whole weights are exact; fractional ones are right on average and a pure function of seed and key', () => {
    expect(copiesFor(2, 's', 'k')).toBe(2);
    expect(copiesFor(0, 's', 'k')).toBe(0);
    const keys = Array.from({ length: 5000 }, (_, index) => `key-${index}`);
    const mean = keys.reduce((sum, key) => sum + copiesFor(1.3, 'seed', key), 0) / keys.length;
    expect(mean).toBeGreaterThan(1.27);
    expect(mean).toBeLessThan(1.33);
    expect(keys.map((key) => copiesFor(0.5, 'seed', key))).toEqual(keys.map((key) => copiesFor(0.5, 'seed', key)));
    for (const key of keys.slice(0, 50)) expect([1, 2]).toContain(copiesFor(1.3, 'seed', key));
  });
});
