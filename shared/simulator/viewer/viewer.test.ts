import { generateTasks } from '../tasks/generate-tasks';
import { taskCategories, type Task } from '../tasks/task-schema';
import { createWorld } from '../world/world';
import { createScriptedViewer } from './viewer';

describe('createScriptedViewer', () => {
  const categoryWeights = Object.fromEntries(
    taskCategories.map((category) => [category, category === 'multi_turn' ? 1 : 0]),
  );
  const options = { count: 12, seed: 'viewer', world: { itemCount: 300 }, categoryWeights };
  const followUps = async (tasks: Task[]) => {
    const viewer = createScriptedViewer({ seed: 'paraphrase' });
    const texts: string[] = [];
    for (const task of tasks)
      for (let turnIndex = 1; turnIndex < task.turns.length; turnIndex++)
        texts.push((await viewer.nextMessage({ task, turnIndex, messages: [], world: createWorld(task.room) })).text);
    return texts;
  };

  it('paraphrases the follow-ups of cjk-heavy tasks as chattily as the tasks word them', async () => {
    const plain = await followUps(generateTasks(options));
    const heavy = await followUps(generateTasks({ ...options, text: 'cjk-heavy' }));
    expect(heavy.length).toBe(plain.length);
    expect(heavy.length).toBeGreaterThan(10);
    const characters = (texts: string[]) => texts.reduce((sum, text) => sum + [...text].length, 0);
    expect(characters(heavy)).toBeGreaterThan(2 * characters(plain));
    expect(heavy.every((text) => !text.includes('\n'))).toBe(true);
  });
});
