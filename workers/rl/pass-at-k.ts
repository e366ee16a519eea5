/**
 * The unbiased pass@k estimator of a group of n samples of which c pass (Chen et al. 2021,
 * "Evaluating Large Language Models Trained on Code"): 1 - C(n-c, k) / C(n, k), the chance
 * that k samples drawn without replacement from the n include a passing one. Computed as a
 * product, 1 - prod_{i = n-c+1..n} (1 - k/i), which never forms the large binomials.
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || k < 1 || n < k || c < 0 || c > n) {
    throw new RangeError(`passAtK: need integers 1 <= k <= n and 0 <= c <= n, got n=${n} c=${c} k=${k}`);
  }
  if (n - c < k) return 1;
  let allFail = 1;
  for (let i = n - c + 1; i <= n; i++) allFail *= 1 - k / i;
  return 1 - allFail;
}
