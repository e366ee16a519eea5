import fc from 'fast-check';
import { assignSplits, type HeldOutSettings } from './split-assignment';

const noHeldOut: HeldOutSettings = { variantHashes: [], families: [], split: 'heldout' };

describe('assignSplits', () => {
  const samples = fc.array(
    fc.record({
      taskId: fc.constantFrom('t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8'),
      variantHash: fc.option(fc.constantFrom('v1', 'v2', 'v3'), { nil: undefined }),
      families: fc.option(fc.subarray(['tool_schemas', 'hooks', 'skill_ids']), { nil: undefined }),
    }),
    { maxLength: 60 },
  );
  const heldOut = fc.record({
    variantHashes: fc.subarray(['v1', 'v2']),
    families: fc.subarray(['hooks']),
    split: fc.constantFrom<'heldout' | 'validation'>('heldout', 'validation'),
  });

  test('property: no task is on both sides, held-out variants never train, and the split is a function of the task alone', () => {
    fc.assert(
      fc.property(
        samples,
        heldOut,
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.string({ minLength: 1, maxLength: 8 }),
        (facts, held, fraction, seed) => {
          const splits = assignSplits(facts, { seed, validationFraction: fraction, heldOut: held });
          const trainTasks = new Set(
            facts.filter((_, index) => splits[index] === 'train').map((sample) => sample.taskId),
          );
          const evaluationTasks = new Set(
            facts.filter((_, index) => splits[index] !== 'train').map((sample) => sample.taskId),
          );
          for (const task of trainTasks) expect(evaluationTasks.has(task)).toBe(false);
          for (const [index, sample] of facts.entries()) {
            const isHeld =
              (sample.variantHash !== undefined && held.variantHashes.includes(sample.variantHash)) ||
              (sample.families ?? []).some((family) => held.families.includes(family));
            if (isHeld) expect(splits[index]).toBe(held.split);
          }
          // Adding or removing other tasks never moves a task that has no held-out sample.
          const alone = facts.filter((sample) => sample.taskId === 't1');
          const aloneSplits = assignSplits(alone, { seed, validationFraction: fraction, heldOut: held });
          expect(aloneSplits).toEqual(splits.filter((_, index) => facts[index].taskId === 't1'));
        },
      ),
      { numRuns: 300, seed: 5 },
    );
  });

  test('about the validation fraction of tasks go to validation', () => {
    const facts = Array.from({ length: 4000 }, (_, index) => ({ taskId: `task-${index}` }));
    const splits = assignSplits(facts, { seed: 's', validationFraction: 0.1, heldOut: noHeldOut });
    const share = splits.filter((split) => split === 'validation').length / facts.length;
    expect(share).toBeGreaterThan(0.08);
    expect(share).toBeLessThan(0.12);
    expect(assignSplits(facts, { seed: 'other', validationFraction: 0.1, heldOut: noHeldOut })).not.toEqual(splits);
  });
});
