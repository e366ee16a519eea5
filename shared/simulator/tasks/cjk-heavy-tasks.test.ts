import { canonicalJson } from '../../hash/hash';
import { cjkShare } from '../../text/cjk-bytes';
import { executeCapability } from '../tools/execute-tool-call';
import { createWorld } from '../world/world';
import { generateTasks } from './generate-tasks';
import { taskSchema, type Task } from './task-schema';

describe('generateTasks with text: cjk-heavy', () => {
  const options = { count: 220, seed: 'gen', world: { itemCount: 600 } };
  const plain = generateTasks(options);
  const heavy = generateTasks({ ...options, text: 'cjk-heavy' });
  const messages = (set: Task[]) => set.flatMap((task) => task.turns.map((turn) => turn.message));
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

  it('draws the categories, rooms and intents of the default text, each message wrapping the default question', () => {
    expect(heavy.map((task) => task.category)).toEqual(plain.map((task) => task.category));
    heavy.forEach((task, index) => {
      const other = plain[index];
      expect(task.room.links).toEqual(other.room.links);
      expect(task.room.items.map((item) => item.skus)).toEqual(other.room.items.map((item) => item.skus));
      expect(task.turns.map((turn) => turn.intent)).toEqual(other.turns.map((turn) => turn.intent));
      task.turns.forEach((turn, turnIndex) => expect(turn.message).toContain(other.turns[turnIndex].message));
    });
  });

  it('writes viewer comments of several clauses with particles and emoji, on one line', () => {
    const written = messages(heavy);
    const lengths = written.map((message) => [...message].length);
    expect(mean(lengths)).toBeGreaterThan(2.5 * mean(messages(plain).map((message) => [...message].length)));
    const clauses = (message: string) => message.split(/[，。！？!?～ ]+/u).filter(Boolean).length;
    expect(written.filter((message) => clauses(message) >= 3).length / written.length).toBeGreaterThan(0.6);
    expect(written.some((message) => /\p{Extended_Pictographic}/u.test(message))).toBe(true);
    expect(written.every((message) => !message.includes('\n'))).toBe(true);
  });

  it('is CJK-heavy: long titles, and far more of each task record is CJK than with the default text', () => {
    for (const task of heavy)
      for (const item of task.room.items) expect([...item.title].length).toBeGreaterThanOrEqual(30);
    const share = (set: Task[]) => cjkShare(set.map((task) => JSON.stringify(task)).join('\n'));
    // A task is a room as JSON: ids, prices, stock and size charts stay ASCII whatever the text,
    // so 0.35 (the default text: 0.23) is what long text in every field that holds text gives.
    expect(share(plain)).toBeLessThan(0.25);
    expect(share(heavy)).toBeGreaterThan(0.35);
    expect(cjkShare(messages(heavy).join(''))).toBeGreaterThan(0.85);
  });

  it('is deterministic, records its text in the source, and leaves the default text as it was', () => {
    expect(canonicalJson(generateTasks({ ...options, text: 'cjk-heavy' }))).toBe(canonicalJson(heavy));
    expect(canonicalJson(generateTasks({ ...options, text: 'default' }))).toBe(canonicalJson(plain));
    expect(heavy.map((task) => task.source)).toEqual(
      heavy.map((_task, index) => ({ kind: 'generated', seed: 'gen', index, text: 'cjk-heavy' })),
    );
    expect(plain.every((task) => !('text' in task.source))).toBe(true);
    for (const task of heavy) expect(taskSchema.parse(JSON.parse(JSON.stringify(task)))).toEqual(task);
  });

  it('states facts the tools return: spec values and selling points as the item detail gives them', () => {
    for (const task of heavy) {
      const world = createWorld(task.room);
      for (const turn of task.turns) {
        const intent = turn.intent;
        if (intent.kind !== 'spec' && !(intent.kind === 'trap' && intent.trap === 'best')) continue;
        const detail = executeCapability(world, 'item_detail', { item_id: intent.itemId }) as {
          specs: Record<string, string>;
          selling_points: string[];
        };
        const accepted = turn.expect.facts[0].accepted ?? [];
        if (intent.kind === 'spec') expect(accepted).toContain(detail.specs[intent.specKey]);
        else expect(accepted).toContain(detail.selling_points[0].split('，')[0]);
      }
    }
  });
});
