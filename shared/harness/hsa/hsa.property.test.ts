import fc from 'fast-check';
import { promptFormats, toolCapabilities } from '../harness-types';
import { harnessHash } from '../harness-hash';
import { validateHarness } from '../load-harness';
import { Rng } from '../../random/rng';
import { augmentTrajectory, prepareVariant } from './augment-trajectory';
import { generateVariant } from './generate-variant';
import { randomHarness, randomRoomContext, randomTrajectory, type RandomHarnessShape } from './testing/random-harness';
import { parseRecordedTrajectory, rewriteTrajectory } from './rewrite-trajectory';
import { checkRoundTrip, checkSchemas, findHarnessLeaks, findTrajectoryLeaks } from './variant-checks';
import { hsaFamilies } from './variant-mapping';

const layout = fc.constantFrom('plain' as const, 'renamed' as const, 'nested' as const, 'absent' as const);
const harnessShape: fc.Arbitrary<RandomHarnessShape> = fc.record({
  tools: fc.array(
    fc.record({
      capability: fc.constantFrom(...toolCapabilities),
      layouts: fc.array(layout, { minLength: 4, maxLength: 4 }),
      ignored: fc.boolean(),
      unread: fc.boolean(),
      respell: fc.boolean(),
    }),
    { minLength: 1, maxLength: 5 },
  ),
  skills: fc.integer({ min: 0, max: 4 }),
  hooks: fc.array(
    fc.constantFrom(
      'max_chars' as const,
      'must_mention' as const,
      'banned_terms' as const,
      'tone' as const,
      'none' as const,
    ),
    { maxLength: 3 },
  ),
  format: fc.constantFrom(...promptFormats),
  seed: fc.string({ minLength: 1, maxLength: 8 }),
});
const families = fc.subarray([...hsaFamilies], { minLength: 1 });
const runs = { numRuns: Number(process.env.HSA_PROPERTY_RUNS ?? 60) };

describe('HSA properties over random harnesses and trajectories', () => {
  it('random harnesses are valid and their trajectories rebuild exactly (the generator is sound)', () => {
    fc.assert(
      fc.property(harnessShape, fc.nat(), (shape, seed) => {
        const harness = randomHarness(shape);
        expect(validateHarness(harness)).toEqual([]);
        const trajectory = randomTrajectory(harness, `t${seed}`);
        expect(parseRecordedTrajectory(trajectory, harness, randomRoomContext).ok).toBe(true);
      }),
      runs,
    );
  });

  it('every variant is a valid harness with no renamed name left in it', () => {
    fc.assert(
      fc.property(harnessShape, families, fc.nat(), (shape, chosen, seed) => {
        const harness = randomHarness(shape);
        const variant = generateVariant(harness, { families: chosen, rng: new Rng(`v${seed}`) });
        expect(validateHarness(variant.harness)).toEqual([]);
        expect(findHarnessLeaks(variant.harness, variant.mapping)).toEqual([]);
        // A family with nothing to change (hooks on a harness without hooks) changes nothing and says so.
        if (variant.mapping.families.length === 0) expect(harnessHash(variant.harness)).toBe(harnessHash(harness));
      }),
      runs,
    );
  });

  it('rewritten calls map back to exactly the recorded calls, validate against the variant schemas, and leak nothing', () => {
    fc.assert(
      fc.property(harnessShape, families, fc.nat(), fc.nat(), (shape, chosen, variantSeed, trajectorySeed) => {
        const harness = randomHarness(shape);
        const variant = generateVariant(harness, { families: chosen, rng: new Rng(`v${variantSeed}`) });
        const trajectory = randomTrajectory(harness, `t${trajectorySeed}`);
        const context = randomRoomContext;
        const prepared = prepareVariant(harness, variant);
        const rewritten = rewriteTrajectory(trajectory, context, prepared);
        if (!rewritten.ok) throw new Error(`${rewritten.reason}: ${rewritten.detail}`);
        expect(checkRoundTrip(rewritten.calls, variant.mapping)).toBeUndefined();
        expect(checkSchemas(rewritten.calls)).toBeUndefined();
        expect(
          findTrajectoryLeaks(
            rewritten.trajectory,
            rewritten.calls,
            variant.mapping,
            prepared.entityRenamer,
            rewritten.context,
          ),
        ).toEqual([]);
        // The rewrite is exactly what the variant would have shown: parsing it back under the variant succeeds.
        expect(parseRecordedTrajectory(rewritten.trajectory, variant.harness, rewritten.context).ok).toBe(true);
        const parsed = parseRecordedTrajectory(trajectory, harness, context);
        if (!parsed.ok) throw new Error(parsed.detail);
        const outcome = augmentTrajectory(trajectory, parsed.timeline, context, prepared);
        if (!outcome.ok) expect(`${outcome.reason}: ${outcome.detail}`).toMatch(/^constraint_changed: /);
      }),
      runs,
    );
  });
});
