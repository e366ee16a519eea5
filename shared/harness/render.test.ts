import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promptFormats, type Harness, type PromptFormat } from './harness-types';
import { loadHarness } from './load-harness';
import {
  activeConstraints,
  renderHarness,
  renderHarnessShared,
  renderHookInjections,
  type RenderContext,
} from './render';
import { sampleHarnessDirectory } from './sample-harness';

const goldenDirectory = join(__dirname, '__golden__');

/** Compares with a golden file; rewrites it only when UPDATE_GOLDEN=1 (on purpose, then review the diff). */
async function expectGolden(name: string, actual: string): Promise<void> {
  const path = join(goldenDirectory, name);
  if (process.env.UPDATE_GOLDEN === '1') {
    await mkdir(goldenDirectory, { recursive: true });
    await writeFile(path, actual, 'utf8');
    return;
  }
  const expected = await readFile(path, 'utf8').catch(() => {
    throw new Error(
      `golden file ${path} is missing; run UPDATE_GOLDEN=1 npx jest shared/harness/render.test.ts and review it`,
    );
  });
  expect(actual).toBe(expected);
}

const campaignOn: RenderContext = {
  campaignActive: true,
  activeCoupon: '满300减50',
  featuredItem: '桃桃冰丝阔腿裤',
  campaign: '618年中大促',
  roomContext: '在线观众 12,480 人；主推款库存 326 件；20:30 开始第二轮加券。',
};
const campaignOff: RenderContext = { campaignActive: false, featuredItem: '桃桃冰丝阔腿裤' };

let sample: Harness;

beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
});

function inFormat(format: PromptFormat): Harness {
  return { ...sample, prompt: { ...sample.prompt, format } };
}

describe('renderHarness', () => {
  it.each(promptFormats)('renders the sample in %s format as the golden file', async (format) => {
    const rendered = renderHarness(inFormat(format), campaignOn);
    await expectGolden(`live-host.${format}.txt`, `${rendered.systemPrompt}\n`);
    expect(renderHarness(inFormat(format), campaignOn)).toEqual(rendered);
  });

  it('renders the json format as parseable JSON listing every skill', () => {
    const parsed = JSON.parse(renderHarness(inFormat('json'), campaignOn).systemPrompt) as {
      sections: Array<{ id: string; skills?: Array<{ id: string }> }>;
    };
    expect(parsed.sections.map((section) => section.id)).toEqual(sample.prompt.sections.map((section) => section.id));
    expect(parsed.sections.find((section) => section.id === 'skills')?.skills?.map((skill) => skill.id)).toEqual(
      sample.skills.map((skill) => skill.id),
    );
  });

  it('gives the tools list as OpenAI function specs without bindings, as the golden file', async () => {
    const { tools } = renderHarness(sample, campaignOn);
    expect(tools.map((tool) => tool.function.name)).toEqual(sample.tools.map((tool) => tool.name));
    const text = `${JSON.stringify(tools, null, 2)}\n`;
    expect(text).not.toContain('x-hat-binding');
    expect(text).not.toContain('capability');
    await expectGolden('live-host.tools.json', text);
    // The caller may mutate what it gets without changing the harness.
    tools[0]!.function.parameters.type = 'mutated';
    expect(sample.tools[0]?.parameters.type).toBe('object');
  });

  it('copies parameter schemas exactly, an own __proto__ key included', () => {
    const parameters = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string"},"n":{"type":["integer","null"],"enum":[1,null]}}}',
    ) as Record<string, unknown>;
    const harness: Harness = {
      ...sample,
      tools: [{ ...sample.tools[0]!, parameters: parameters as Harness['tools'][number]['parameters'] }],
    };
    const copied = renderHarness(harness, campaignOn).tools[0]!.function.parameters;
    expect(copied).toEqual(structuredClone(parameters));
    expect(Object.keys((copied as { properties: object }).properties)).toEqual(['__proto__', 'n']);
    expect(copied).not.toBe(parameters);
  });

  it('renderHarnessShared renders the same prompt and tools, one tools list per harness tools', () => {
    const shared = renderHarnessShared(sample, campaignOn);
    expect(shared).toEqual(renderHarness(sample, campaignOn));
    expect(renderHarnessShared({ ...sample }, campaignOff).tools).toBe(shared.tools);
    expect(renderHarnessShared({ ...sample, tools: [...sample.tools] }, campaignOn).tools).not.toBe(shared.tools);
  });

  it('shows the system_prompt hooks in force and the room state', () => {
    const on = renderHarness(sample, campaignOn).systemPrompt;
    expect(on).toContain('《广告法》禁止绝对化用语：回复中不得出现最低价、最便宜、最好');
    expect(on).toContain('每条回复至少用一个称呼（宝宝们、家人们、宝子们、亲）');
    expect(on).toContain('- coupon: 满300减50');
    expect(on).toContain('- campaign: 618年中大促');
    expect(on).toContain(campaignOn.roomContext);
    // user_suffix and system_message hooks are injected per event, not in the prompt.
    expect(on).not.toContain('不超过60个字');
    const off = renderHarness(sample, campaignOff).systemPrompt;
    expect(off).not.toContain('coupon:');
    expect(off).not.toContain('campaign:');
    expect(off).toContain('- featured_item: 桃桃冰丝阔腿裤');
  });
});

describe('renderHookInjections', () => {
  it('injects the length limit and the coupon before a reply while a campaign runs', () => {
    const injections = renderHookInjections(sample, 'before_reply', campaignOn);
    expect(injections.userSuffix).toBe('\n（提示：直播节奏快，本条回复不超过60个字。）');
    expect(injections.systemMessages).toEqual([
      '活动进行中：本条回复里请自然地提一句今天的优惠券"满300减50"，引导宝宝们先领券再下单。',
    ]);
  });

  it('drops the coupon hook without a campaign, and without a coupon to mention', () => {
    expect(renderHookInjections(sample, 'before_reply', campaignOff).systemMessages).toEqual([]);
    expect(
      renderHookInjections(sample, 'before_reply', { ...campaignOn, activeCoupon: undefined }).systemMessages,
    ).toEqual([]);
    expect(renderHookInjections(sample, 'before_reply', campaignOff).userSuffix).toContain('不超过60个字');
  });

  it('injects the featured-item nudge at session start only when an item is featured', () => {
    expect(renderHookInjections(sample, 'session_start', campaignOn).systemMessages).toEqual([
      '本场主推款是"桃桃冰丝阔腿裤"。观众的需求和它相关时优先介绍它，需求不相关时不要硬推。',
    ]);
    expect(renderHookInjections(sample, 'session_start', { campaignActive: false }).systemMessages).toEqual([]);
    expect(renderHookInjections(sample, 'session_start', campaignOn).userSuffix).toBe('');
  });

  it('reminds the model to stick to tool facts after a tool result', () => {
    const injections = renderHookInjections(sample, 'after_tool_result', campaignOff);
    expect(injections.systemMessages).toHaveLength(1);
    expect(injections.systemMessages[0]).toContain('只说结果里有的内容');
    expect(renderHookInjections(sample, 'user_message', campaignOn)).toEqual({ userSuffix: '', systemMessages: [] });
  });
});

describe('activeConstraints', () => {
  it('lists every checkable constraint in force during a campaign, with the coupon to mention', () => {
    const constraints = activeConstraints(sample, campaignOn);
    expect(constraints.map((entry) => [entry.hookId, entry.constraint.type])).toEqual([
      ['reply_length', 'max_chars'],
      ['coupon_mention', 'must_mention'],
      ['ad_law_terms', 'banned_terms'],
      ['persona_tone', 'tone'],
    ]);
    expect(constraints[0]).toMatchObject({
      constraint: { type: 'max_chars', value: 60 },
      text: '（提示：直播节奏快，本条回复不超过60个字。）',
      event: 'before_reply',
    });
    expect(constraints[1]).toMatchObject({ mention: '满300减50' });
    expect(constraints[1]?.text).toContain('满300减50');
  });

  it('drops the coupon constraint when no campaign runs', () => {
    expect(activeConstraints(sample, campaignOff).map((entry) => entry.hookId)).toEqual([
      'reply_length',
      'ad_law_terms',
      'persona_tone',
    ]);
  });
});
