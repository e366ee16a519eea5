import fc from 'fast-check';
import { groupAdvantages } from './group-advantages';

const grpo = { normalizeByStd: true, epsilon: 1e-6 };
const drGrpo = { normalizeByStd: false, epsilon: 1e-6 };
const all = (count: number) => new Array<boolean>(count).fill(true);

describe('group advantages', () => {
  it('normalizes by the sample std plus epsilon (GRPO), computed by hand', () => {
    // mean 0.5; sample std = sqrt((0.25 + 0.25 + 0 + 0) / 3) = sqrt(1/6) = 0.40824829...
    const result = groupAdvantages([1, 0, 0.5, 0.5], all(4), grpo);
    expect(result.mean).toBe(0.5);
    expect(result.std).toBeCloseTo(0.408248290463863, 12);
    expect(result.zeroVariance).toBe(false);
    const expected = 0.5 / (Math.sqrt(1 / 6) + 1e-6);
    expect(result.advantages[0]).toBeCloseTo(expected, 12);
    expect(result.advantages[0]).toBeCloseTo(1.22474187, 7);
    expect(result.advantages[1]).toBeCloseTo(-expected, 12);
    expect(result.advantages.slice(2)).toEqual([0, 0]);
  });

  it('skips the std division when normalizeByStd is off (Dr. GRPO): r - mean', () => {
    expect(
      groupAdvantages([0.9, 0.3, 0.6], all(3), drGrpo).advantages.map((value) => Number(value.toFixed(12))),
    ).toEqual([0.3, -0.3, 0]);
    // Epsilon only matters when dividing: a big epsilon shrinks GRPO advantages, not Dr. GRPO ones.
    expect(groupAdvantages([1, 0], all(2), { normalizeByStd: true, epsilon: 1 }).advantages[0]).toBeCloseTo(
      0.5 / (Math.SQRT1_2 + 1),
      12,
    );
    expect(groupAdvantages([1, 0], all(2), { normalizeByStd: false, epsilon: 1 }).advantages).toEqual([0.5, -0.5]);
  });

  it('gives a zero-variance group advantage 0 everywhere, float residue included', () => {
    for (const rewards of [[0.7, 0.7, 0.7, 0.7], [0.1 + 0.2, 0.3, 0.3], [1]]) {
      const result = groupAdvantages(rewards, all(rewards.length), grpo);
      expect(result.zeroVariance).toBe(true);
      expect(result.advantages.every((value) => value === 0)).toBe(true);
    }
  });

  it('leaves unscored episodes (endpoint failures) out of the mean and std, with advantage 0', () => {
    // Scored: 1 and 0 -> mean 0.5, sample std sqrt(0.5).
    const result = groupAdvantages([1, 0, 0.2], [true, true, false], drGrpo);
    expect(result).toMatchObject({ mean: 0.5, scored: 2, zeroVariance: false });
    expect(result.std).toBeCloseTo(Math.SQRT1_2, 12);
    expect(result.advantages).toEqual([0.5, -0.5, 0]);
    // One scored episode left: no spread to learn from.
    expect(groupAdvantages([1, 0, 0.2], [true, false, false], grpo)).toMatchObject({
      zeroVariance: true,
      advantages: [0, 0, 0],
    });
  });

  it('centers every group: GRPO advantages sum to 0 and have sample std ~1 (for spreads well above epsilon)', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 2, maxLength: 16 }), (rewards) => {
        const result = groupAdvantages(rewards, all(rewards.length), grpo);
        if (result.zeroVariance) return;
        const sum = result.advantages.reduce((total, value) => total + value, 0);
        expect(Math.abs(sum)).toBeLessThan(1e-6);
        if (result.std > 1e-3) {
          const std = Math.sqrt(
            result.advantages.reduce((total, value) => total + value * value, 0) / (rewards.length - 1),
          );
          expect(std).toBeCloseTo(result.std / (result.std + 1e-6), 6);
        }
      }),
    );
  });
});
