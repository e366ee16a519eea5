import fc from 'fast-check';
import { Rng } from '../../random/rng';
import { argmaxOf, logprobTemperatureOf, sampleToken, topTokenIds, type SamplingParameters } from './token-sampler';

function frequencies(probabilities: number[], parameters: SamplingParameters, draws: number, seed: string): number[] {
  const row = Float32Array.from(probabilities);
  const rng = new Rng(seed);
  const counts = new Array<number>(row.length).fill(0);
  for (let draw = 0; draw < draws; draw++) counts[sampleToken(row, parameters, rng)] += 1;
  return counts.map((count) => count / draws);
}

/** The nucleus by definition: most likely first (lower id on ties) until the mass reaches topP. */
function referenceNucleus(row: Float32Array, topP: number): Set<number> {
  const sorted = Array.from(row.keys()).sort((a, b) => row[b] - row[a] || a - b);
  const total = sorted.reduce((sum, tokenId) => sum + row[tokenId], 0);
  const allowed = new Set<number>();
  let mass = 0;
  for (const tokenId of sorted) {
    allowed.add(tokenId);
    mass += row[tokenId];
    if (mass >= topP * total) break;
  }
  return allowed;
}

describe('token sampler', () => {
  const probabilities = [0.5, 0.3, 0.15, 0.05];

  it('records greedy logprobs at temperature 1 and sampled ones at the sampling temperature', () => {
    expect(logprobTemperatureOf(0)).toBe(1);
    expect(logprobTemperatureOf(0.3)).toBe(0.3);
  });

  it('samples in proportion to the probabilities', () => {
    const observed = frequencies(probabilities, { temperature: 1, topP: 1, topK: 0 }, 20000, 'plain');
    observed.forEach((frequency, tokenId) => expect(Math.abs(frequency - probabilities[tokenId])).toBeLessThan(0.015));
  });

  it('keeps only the top-k tokens, renormalized', () => {
    const observed = frequencies(probabilities, { temperature: 1, topP: 1, topK: 2 }, 20000, 'top-k');
    expect(observed[2]).toBe(0);
    expect(observed[3]).toBe(0);
    expect(Math.abs(observed[0] - 0.5 / 0.8)).toBeLessThan(0.015);
  });

  it('keeps the smallest set reaching the nucleus mass', () => {
    // 0.5 + 0.3 = 0.8 reaches 0.75; token 2 is outside.
    const observed = frequencies(probabilities, { temperature: 1, topP: 0.75, topK: 0 }, 20000, 'top-p');
    expect(observed[2]).toBe(0);
    expect(observed[3]).toBe(0);
    expect(Math.abs(observed[1] - 0.3 / 0.8)).toBeLessThan(0.015);
    // Top-p applies after top-k, on the top-k mass: 0.5 / 0.95 < 0.7 needs the second token too.
    const combined = frequencies(probabilities, { temperature: 1, topP: 0.7, topK: 3 }, 5000, 'top-k-p');
    expect(combined[2]).toBe(0);
    expect(combined[1]).toBeGreaterThan(0);
  });

  it('draws only from the nucleus a full sort defines, on rows of any shape', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: 0, max: 1, noNaN: true }), { minLength: 2, maxLength: 400 }),
        fc.double({ min: 0.05, max: 0.999, noNaN: true }),
        fc.integer({ min: 0, max: 1e9 }),
        (weights, topP, seed) => {
          const total = weights.reduce((sum, weight) => sum + weight, 0);
          fc.pre(total > 0);
          const row = Float32Array.from(weights.map((weight) => weight / total));
          const allowed = referenceNucleus(row, topP);
          const rng = new Rng(seed);
          for (let draw = 0; draw < 20; draw++)
            expect(allowed.has(sampleToken(row, { temperature: 1, topP, topK: 0 }, rng))).toBe(true);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('finds the same nucleus through its histogram on vocabulary-sized rows', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1e9 }),
        fc.double({ min: 0.05, max: 0.999, noNaN: true }),
        fc.integer({ min: 1, max: 12 }),
        (seed, topP, sharpness) => {
          // Peaked to flat rows with ties and zeros, longer than the plain-sort cutoff.
          const rng = new Rng(seed);
          const row = new Float32Array(6000).map(() =>
            rng.chance(0.1) ? 0 : Math.round(Math.pow(rng.next(), sharpness) * 50) / 50,
          );
          const total = row.reduce((sum, value) => sum + value, 0);
          fc.pre(total > 0);
          row.forEach((value, index) => (row[index] = value / total));
          const allowed = referenceNucleus(row, topP);
          for (let draw = 0; draw < 20; draw++)
            expect(allowed.has(sampleToken(row, { temperature: 1, topP, topK: 0 }, rng))).toBe(true);
        },
      ),
      { numRuns: 30 },
    );
  });

  it('samples a flat 150k-token row with top-p from its nucleus', () => {
    const rng = new Rng('flat');
    const row = new Float32Array(151669).map(() => rng.next());
    const total = row.reduce((sum, value) => sum + value, 0);
    row.forEach((value, index) => (row[index] = value / total));
    const allowed = referenceNucleus(row, 0.95);
    const drawn = new Set<number>();
    for (let draw = 0; draw < 20; draw++) drawn.add(sampleToken(row, { temperature: 1, topP: 0.95, topK: 0 }, rng));
    for (const tokenId of drawn) expect(allowed.has(tokenId)).toBe(true);
    expect(drawn.size).toBeGreaterThan(15);
  });

  it('picks the argmax, lowest id on ties', () => {
    expect(argmaxOf(Float32Array.from([1, 3, 3, 2]))).toBe(1);
  });

  it('ranks the top k like a full sort, lower id first on ties', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -5, max: 5 }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 30 }),
        (values, k) => {
          const row = Float32Array.from(values);
          const expected = Array.from(row.keys())
            .sort((a, b) => row[b] - row[a] || a - b)
            .slice(0, k);
          expect(topTokenIds(row, k)).toEqual(expected);
        },
      ),
    );
  });
});
