/**
 * Group-normalized advantages (GRPO): each scored episode's reward minus its group's mean,
 * divided by the group's standard deviation plus epsilon, or not divided (Dr. GRPO).
 *
 * The standard deviation is the **sample** standard deviation (Bessel's correction, n - 1), as
 * `torch.std` computes it by default and so as TRL's and verl's GRPO advantages use it. A group
 * with fewer than two scored episodes has no spread to measure and counts as zero-variance.
 *
 * Only scored episodes enter the statistics: ones whose reward judges the policy (status ok or
 * step_limit). An episode the endpoint failed on (model_error, timeout) says nothing about the
 * policy, so it gets advantage 0 and leaves the mean alone.
 */

export interface AdvantageOptions {
  /** Divide by std + epsilon (GRPO); false: r - mean (Dr. GRPO). */
  normalizeByStd: boolean;
  epsilon: number;
}

export interface GroupAdvantages {
  /** Per episode, in input order; 0 for unscored episodes and in zero-variance groups. */
  advantages: number[];
  /** Mean reward of the scored episodes (0 when none). */
  mean: number;
  /** Sample std of the scored episodes (0 with fewer than two). */
  std: number;
  scored: number;
  /** No learning signal: fewer than two scored episodes, or all scored rewards equal. */
  zeroVariance: boolean;
}

/** Rewards closer than this count as equal (summing floats can leave a last-bit residue). */
const equalRewards = 1e-12;

/** `rewards[i]` of episode i; `scored[i]` false for an episode the statistics leave out. */
export function groupAdvantages(
  rewards: readonly number[],
  scored: readonly boolean[],
  options: AdvantageOptions,
): GroupAdvantages {
  const values = rewards.filter((_, index) => scored[index]);
  const count = values.length;
  const mean = count === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / count;
  const std = count < 2 ? 0 : Math.sqrt(values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (count - 1));
  const zeroVariance = count < 2 || Math.max(...values) - Math.min(...values) <= equalRewards;
  const advantages = rewards.map((reward, index) => {
    if (zeroVariance || !scored[index]) return 0;
    const centered = reward - mean;
    return options.normalizeByStd ? centered / (std + options.epsilon) : centered;
  });
  return { advantages, mean, std, scored: count, zeroVariance };
}
