import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openArtifactObject } from '../../shared/artifacts/create-artifact-store';
import { loadPrompts } from './prompt-sources';

let directory: string;

beforeAll(() => {
  directory = mkdtempSync(join(tmpdir(), 'hat-distill-prompts-'));
});

afterAll(() => rmSync(directory, { recursive: true, force: true }));

function file(name: string, lines: unknown[]): string {
  const path = join(directory, name);
  writeFileSync(path, lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n'));
  return path;
}

const open = (uri: string) => openArtifactObject(uri);

describe('distill prompt sources', () => {
  it('ships 60 varied general instructions with unique ids, in English and Chinese, many with verifiable constraints', async () => {
    const { prompts, lineage } = await loadPrompts(
      { prompts: [{ kind: 'builtin', name: 'general-instructions' }], inputs: [] },
      open,
    );
    expect(prompts).toHaveLength(60);
    expect(new Set(prompts.map((prompt) => prompt.id)).size).toBe(60);
    const users = prompts.map((prompt) => prompt.messages.at(-1)!.content);
    expect(users.filter((text) => /[\u4e00-\u9fff]/.test(text ?? '')).length).toBeGreaterThanOrEqual(20);
    expect(users.filter((text) => /^[\x00-\x7f]*$/.test(text ?? '')).length).toBeGreaterThanOrEqual(20);
    expect(users.some((text) => /exactly 3 bullet points/.test(text ?? ''))).toBe(true);
    expect(prompts.some((prompt) => prompt.messages[0].role === 'system')).toBe(true);
    expect(lineage[0].uri).toMatch(/examples\/prompts\/general-instructions\.jsonl$/);
  });

  it('reads {id, prompt, system} and {id, messages, tools}, applies limits, and names the file after itself', async () => {
    const path = file('mine.jsonl', [
      { id: 1, prompt: 'Hi', system: 'Be brief.', tags: ['labels for the reader'] },
      {
        id: 'b',
        messages: [{ role: 'user', content: '你好' }],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      },
      { id: 'c', prompt: 'cut by the limit' },
    ]);
    const { prompts } = await loadPrompts({ prompts: [{ kind: 'jsonl', uri: path, limit: 2 }], inputs: [] }, open);
    expect(prompts).toEqual([
      {
        source: 'mine',
        id: '1',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
      },
      {
        source: 'mine',
        id: 'b',
        messages: [{ role: 'user', content: '你好' }],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      },
    ]);
  });

  it('reports bad lines with their number and what to do', async () => {
    const path = file('bad.jsonl', [
      { id: 'a', prompt: 'fine' },
      { id: 'b' },
      {
        id: 'c',
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a' },
        ],
      },
    ]);
    await expect(loadPrompts({ prompts: [{ kind: 'jsonl', uri: path }], inputs: [] }, open)).rejects.toThrow(
      /line 2.*give exactly one of "messages" \(chat messages\) or "prompt"/s,
    );
    const ending = file('ending.jsonl', [
      {
        id: 'c',
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a' },
        ],
      },
    ]);
    await expect(loadPrompts({ prompts: [], inputs: [ending] }, open)).rejects.toThrow(
      /line 1: messages\[1\]\.role: the last message is "assistant"; end with the user \(or tool\) turn/s,
    );
    // A field the format does not have is refused with its path, not read past (a misspelt "sytem" would vanish).
    const unknown = file('unknown.jsonl', [{ id: 'u', prompt: 'q', sytem: 'Be brief.' }]);
    await expect(loadPrompts({ prompts: [], inputs: [unknown] }, open)).rejects.toThrow(
      /^\[UNKNOWN_FIELD\] [\s\S]*line 1: sytem: not a field of this record/,
    );
    const twice = file('twice.jsonl', [
      { id: 'x', prompt: 'one' },
      { id: 'x', prompt: 'two' },
    ]);
    await expect(loadPrompts({ prompts: [{ kind: 'jsonl', uri: twice }], inputs: [] }, open)).rejects.toMatchObject({
      code: 'DUPLICATE_PROMPT_ID',
    });
  });

  it("renders simulator tasks through the harness: system prompt, hooks, the viewer's message and the tools", async () => {
    const { prompts, lineage } = await loadPrompts(
      { prompts: [{ kind: 'tasks', generate: { count: 3, seed: '5' } }], inputs: [] },
      open,
    );
    expect(prompts).toHaveLength(3);
    for (const prompt of prompts) {
      expect(prompt.source).toBe('tasks');
      expect(prompt.messages[0].role).toBe('system');
      expect(prompt.messages[0].content).toContain('直播间ID');
      expect(prompt.messages.some((message) => message.role === 'user')).toBe(true);
      expect(prompt.tools!.map((tool) => tool.function.name)).toContain('get_item_detail');
    }
    expect(lineage[0].uri).toMatch(/examples\/harness\/live-host$/);
    const again = await loadPrompts(
      { prompts: [{ kind: 'tasks', generate: { count: 3, seed: '5' } }], inputs: [] },
      open,
    );
    expect(again.prompts).toEqual(prompts);
  });

  it("draws generated tasks from the generator's knobs, as collect does (categories, references)", async () => {
    const generate = {
      count: 4,
      seed: '5',
      categoryWeights: {
        after_sales_multi_turn: 1,
        price: 0,
        spec: 0,
        stock_size: 0,
        coupon_math: 0,
        shipping_after_sales: 0,
        comparison: 0,
        chit_chat: 0,
        compliance_trap: 0,
        multi_question: 0,
        multi_turn: 0,
        out_of_catalog: 0,
      },
      references: { onScreen: 1 },
    };
    const { prompts } = await loadPrompts({ prompts: [{ kind: 'tasks', generate }], inputs: [] }, open);
    const viewer = prompts.map(
      (prompt) => prompt.messages.filter((message) => message.role === 'user').at(-1)!.content,
    );
    const plain = await loadPrompts(
      { prompts: [{ kind: 'tasks', generate: { count: 4, seed: '5' } }], inputs: [] },
      open,
    );
    expect(viewer).not.toEqual(
      plain.prompts.map((prompt) => prompt.messages.filter((message) => message.role === 'user').at(-1)!.content),
    );
    // A generator that cannot draw is refused with its code, as collect and rl refuse it.
    const none = { count: 2, seed: '5', categoryWeights: { ...generate.categoryWeights, after_sales_multi_turn: 0 } };
    await expect(loadPrompts({ prompts: [{ kind: 'tasks', generate: none }], inputs: [] }, open)).rejects.toMatchObject(
      {
        code: 'BAD_TASK_GENERATOR',
      },
    );
    // Every prompt is an after-sales question (shipping, returns, warranty, invoice) about the item on screen.
    for (const text of viewer) expect(String(text)).toMatch(/邮|发货|快递|退|换|保修|坏|票|偏远|新疆|西藏|到/);
  });
});
