import { canonicalJson } from '../../hash/hash';
import { executeCapability } from '../tools/execute-tool-call';
import { createWorld } from '../world/world';
import { defaultCategoryWeights, generateTasks } from './generate-tasks';
import { taskCategories, taskSchema, type TaskCategory } from './task-schema';

/** Category weights that draw one category only. */
const only = (wanted: TaskCategory) =>
  Object.fromEntries(taskCategories.map((category) => [category, category === wanted ? 1 : 0]));

describe('generateTasks', () => {
  const tasks = generateTasks({ count: 220, seed: 'gen', world: { itemCount: 600 } });

  it('is deterministic under a seed and differs across seeds', () => {
    expect(canonicalJson(generateTasks({ count: 220, seed: 'gen', world: { itemCount: 600 } }))).toBe(
      canonicalJson(tasks),
    );
    expect(generateTasks({ count: 5, seed: 'other', world: { itemCount: 600 } }).map((task) => task.id)).not.toEqual(
      tasks.slice(0, 5).map((task) => task.id),
    );
  });

  it('generates any slice [start, start + count) of the sequence alone, as collect parts do', () => {
    const whole = generateTasks({ count: 12, seed: 'slices', world: { itemCount: 200 } });
    for (const [start, count] of [
      [0, 5],
      [5, 5],
      [10, 2],
      [3, 1],
    ])
      expect(generateTasks({ count, start, seed: 'slices', world: { itemCount: 200 } })).toEqual(
        whole.slice(start, start + count),
      );
  });

  it('makes valid, self-contained tasks in every category of the default mix with unique ids', () => {
    expect(new Set(tasks.map((task) => task.category))).toEqual(
      new Set(taskCategories.filter((category) => defaultCategoryWeights[category] > 0)),
    );
    expect(new Set(tasks.map((task) => task.id)).size).toBe(tasks.length);
    for (const task of tasks) {
      expect(taskSchema.parse(JSON.parse(JSON.stringify(task)))).toEqual(task);
      const world = createWorld(task.room);
      expect(task.room.items.length).toBeGreaterThanOrEqual(4);
      for (const turn of task.turns) {
        const intent = turn.intent.kind === 'multi' ? turn.intent.parts : [turn.intent];
        for (const part of intent) if ('itemId' in part) expect(world.itemsById.has(part.itemId)).toBe(true);
      }
    }
  });

  it('states facts the tools would return (expectations and tools cannot drift)', () => {
    for (const task of tasks.filter((entry) => entry.category === 'coupon_math')) {
      const world = createWorld(task.room);
      const intent = task.turns[0].intent;
      if (intent.kind !== 'final_price') continue;
      const sku =
        intent.spec !== undefined
          ? world.itemsById.get(intent.itemId)!.skus.find((entry) => entry.spec === intent.spec)
          : undefined;
      const quote = executeCapability(world, 'price_quote', {
        item_id: intent.itemId,
        quantity: intent.quantity,
        ...(sku ? { sku_id: sku.skuId } : {}),
      }) as { final_price: number };
      expect(task.turns[0].expect.facts[0].values).toEqual([quote.final_price]);
    }
    for (const task of tasks.filter((entry) => entry.category === 'out_of_catalog')) {
      const intent = task.turns[0].intent;
      if (intent.kind === 'unknown_item')
        expect(
          (executeCapability(createWorld(task.room), 'item_search', { query: intent.query }) as { total: number })
            .total,
        ).toBe(0);
      expect(task.turns[0].expect.admitUnknown).toBe(true);
    }
  });

  it('follows category weights, and multi-turn tasks carry follow-ups', () => {
    const onlyTraps = generateTasks({
      count: 30,
      seed: 'w',
      world: { itemCount: 300 },
      categoryWeights: only('compliance_trap'),
    });
    expect(new Set(onlyTraps.map((task) => task.category))).toEqual(new Set(['compliance_trap']));
    for (const task of onlyTraps) expect(task.turns[0].expect.forbidden.length).toBeGreaterThan(0);
    for (const task of tasks.filter((entry) => entry.category === 'multi_turn')) {
      expect(task.turns.length).toBeGreaterThanOrEqual(2);
      expect(
        task.turns
          .slice(1)
          .every((turn) => turn.intent.kind !== 'multi' && 'ref' in turn.intent && turn.intent.ref.kind === 'previous'),
      ).toBe(true);
    }
  });

  it('after-sales multi-turn tasks ask two or three different policy questions about one item, the default mix never draws them', () => {
    const policyDesk = generateTasks({
      count: 40,
      seed: 'desk',
      world: { itemCount: 300 },
      categoryWeights: only('after_sales_multi_turn'),
    });
    for (const task of policyDesk) {
      expect(task.category).toBe('after_sales_multi_turn');
      expect(taskSchema.parse(JSON.parse(JSON.stringify(task)))).toEqual(task);
      expect(task.turns.length).toBeGreaterThanOrEqual(2);
      expect(task.turns.length).toBeLessThanOrEqual(3);
      const intents = task.turns.map((turn) => turn.intent);
      expect(intents.every((intent) => intent.kind === 'policy')).toBe(true);
      const aspects = intents.map((intent) => (intent.kind === 'policy' ? intent.aspect : ''));
      expect(new Set(aspects).size).toBe(aspects.length);
      const refs = intents.map((intent) => ('ref' in intent ? intent.ref.kind : ''));
      expect(refs[0]).not.toBe('previous');
      expect(refs.slice(1).every((kind) => kind === 'previous')).toBe(true);
    }
    expect(tasks.some((task) => task.category === 'after_sales_multi_turn')).toBe(false);
  });

  it('refers to items the way `references` says: on screen, by link number or by name', () => {
    const refKinds = (references: { onScreen?: number; byLink?: number }) =>
      generateTasks({ count: 120, seed: 'refs', world: { itemCount: 600 }, references })
        .flatMap((task) => task.turns.map((turn) => turn.intent))
        .flatMap((intent) => (intent.kind === 'multi' ? intent.parts : [intent]))
        .flatMap((intent) => ('ref' in intent ? [intent.ref.kind] : []))
        .filter((kind) => kind !== 'previous');
    const count = (kinds: string[], kind: string) => kinds.filter((entry) => entry === kind).length;
    const onScreen = refKinds({ onScreen: 1 });
    // Comparisons name their second item otherwise: only one item can be on screen.
    expect(count(onScreen, 'featured') / onScreen.length).toBeGreaterThan(0.9);
    const byLink = refKinds({ onScreen: 0, byLink: 1 });
    expect(new Set(byLink)).toEqual(new Set(['link']));
    const byName = refKinds({ onScreen: 0, byLink: 0 });
    expect(new Set(byName)).toEqual(new Set(['name']));
    // The defaults draw as before: the same tasks as without the option.
    expect(canonicalJson(generateTasks({ count: 30, seed: 'gen', world: { itemCount: 600 }, references: {} }))).toBe(
      canonicalJson(tasks.slice(0, 30)),
    );
  });
});
