import fc from 'fast-check';
import { sha256Hex } from '../../shared/hash/hash';
import { KeySet, SampleTable, taskHashOf, type SampleFields } from './sample-table';

describe('KeySet', () => {
  it('finds every key it was given and orders keys as their hex text, across many rehashes', () => {
    const keys = Array.from({ length: 5000 }, (_, index) => sha256Hex(`conversation ${index}`));
    const set = new KeySet();
    const indexes = keys.map((key) => set.add(key));
    expect(indexes.every((result, index) => result.added && result.index === index)).toBe(true);
    expect(keys.map((key) => set.add(key))).toEqual(keys.map((_, index) => ({ index, added: false })));
    expect(set.size).toBe(5000);
    expect(keys.every((key, index) => set.hex(index) === key)).toBe(true);
    const byText = keys.map((_, index) => index).sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
    expect(
      keys
        .map((_, index) => index)
        .sort((a, b) => set.compare(a, b))
        .every((index, position) => index === byText[position]),
    ).toBe(true);
  });

  it('orders keys that share a long prefix by the first hex digit that differs', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9a-f]{64}$/), fc.nat(63), fc.nat(15), (key, position, digit) => {
        const other = `${key.slice(0, position)}${digit.toString(16)}${key.slice(position + 1)}`;
        const set = new KeySet();
        const a = set.add(key).index;
        const b = set.add(other).index;
        expect(Math.sign(set.compare(a, b))).toBe(key < other ? -1 : key > other ? 1 : 0);
      }),
    );
  });

  it('refuses a key that is not a sha256, as a damaged part file', () => {
    expect(() => new KeySet().add('not-a-key')).toThrow(/PART_OUTPUT_DAMAGED.*"not-a-key" is not a sha256; rerun/);
  });
});

describe('SampleTable', () => {
  const fieldsArbitrary = fc.record({
    part: fc.nat(10_000),
    entry: fc.nat(100_000),
    conversation: fc.nat(100_000),
    inputIndex: fc.nat(60_000),
    key: fc.nat(1_000_000),
    id: fc.string({ unit: 'grapheme', maxLength: 60 }),
    taskHash: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    draw: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
    heldOut: fc.boolean(),
    tokenOffset: fc.nat(2 ** 40),
    tokenCount: fc.nat(2 ** 31),
    spans: fc.array(fc.tuple(fc.nat(100_000), fc.nat(100_000)), { maxLength: 8 }),
    foldedHookMessages: fc.nat(1000),
  });

  it('gives back every field of every sample it holds', () => {
    fc.assert(
      fc.property(fc.array(fieldsArbitrary, { maxLength: 3000 }), (rows: SampleFields[]) => {
        const table = new SampleTable();
        rows.forEach((row, index) => expect(table.add(row)).toBe(index));
        expect(table.length).toBe(rows.length);
        rows.forEach((row, index) =>
          expect({
            part: table.partOf(index),
            entry: table.entryOf(index),
            conversation: table.conversationOf(index),
            inputIndex: table.inputIndexOf(index),
            key: table.keyOf(index),
            id: table.idOf(index),
            taskHash: table.taskHashOf(index),
            draw: table.drawOf(index),
            heldOut: table.heldOutOf(index),
            tokenOffset: table.tokenOffsetOf(index),
            tokenCount: table.tokenCountOf(index),
            spans: table.spansOf(index),
            foldedHookMessages: table.foldedHookMessagesOf(index),
          }).toEqual(row),
        );
      }),
      { numRuns: 20 },
    );
  });

  it('starts every sample in train with one copy, and keeps the split and copies it is given', () => {
    const table = new SampleTable();
    const base: SampleFields = {
      part: 0,
      entry: 0,
      conversation: 0,
      inputIndex: 0,
      key: 0,
      id: 'a',
      taskHash: taskHashOf('task-1'),
      draw: 0.5,
      heldOut: false,
      tokenOffset: 0,
      tokenCount: 10,
      spans: [],
      foldedHookMessages: 0,
    };
    table.add(base);
    table.add({ ...base, id: 'b' });
    expect([table.splitOf(0), table.copiesOf(0)]).toEqual(['train', 1]);
    table.setSplit(1, 'heldout');
    table.setCopies(1, 3);
    expect([table.splitOf(1), table.copiesOf(1), table.splitOf(0)]).toEqual(['heldout', 3, 'train']);
    expect(taskHashOf('task-1')).toBe(table.taskHashOf(1));
    expect(taskHashOf('task-2')).not.toBe(taskHashOf('task-1'));
  });
});
