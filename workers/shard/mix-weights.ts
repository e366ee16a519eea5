import { Rng } from '../../shared/random/rng';

/**
 * Copies of one sample in the train split for its input set's weight: the weight is the expected
 * number of copies. The whole part (floor) always; one more with probability equal to the
 * fraction, drawn from (seed, sample key), so the choice does not depend on order, partitioning
 * or what else is in the mix. Weight 1 keeps every sample once, 2.5 gives two or three copies
 * (2.5 on average), 0.3 keeps about 30%, 0 none.
 */
export function copiesFor(weight: number, seed: string, sampleKey: string): number {
  const whole = Math.floor(weight);
  const fraction = weight - whole;
  if (fraction === 0) return whole;
  return whole + (new Rng(`${seed}/weight/${sampleKey}`).next() < fraction ? 1 : 0);
}
