import type { Harness } from '../../harness/harness-types';
import { loadHarness } from '../../harness/load-harness';
import { sampleHarnessDirectory } from '../../harness/sample-harness';
import type { ChatMessage } from '../../trajectory/messages';
import { rewardSchema, type Trajectory } from '../../trajectory/trajectory';
import { runEpisode } from '../agent-loop';
import { ScriptedExpert } from '../policies/scripted-expert';
import { generateTasks } from '../tasks/generate-tasks';
import type { Task, TaskCategory } from '../tasks/task-schema';
import { renameHarness } from '../testing/renamed-harness';
import { createWorld, couponLabel } from '../world/world';
import { verifyEpisode } from './verify-episode';

let harness: Harness;

beforeAll(async () => {
  harness = await loadHarness(sampleHarnessDirectory());
});

/** A task of one category (matching an optional test) and the expert's episode on it. */
async function solved(
  category: TaskCategory,
  seed: string,
  accept: (task: Task) => boolean = () => true,
  under?: Harness,
  count = 60,
): Promise<{ task: Task; trajectory: Trajectory }> {
  const tasks = generateTasks({
    count,
    seed,
    world: { itemCount: 500 },
    categoryWeights: {
      ...Object.fromEntries(
        [
          'price',
          'spec',
          'stock_size',
          'coupon_math',
          'shipping_after_sales',
          'comparison',
          'chit_chat',
          'compliance_trap',
          'multi_question',
          'multi_turn',
          'out_of_catalog',
        ].map((name) => [name, 0]),
      ),
      [category]: 1,
    },
  });
  const task = tasks.find(accept);
  if (task === undefined) throw new Error(`no ${category} task matched in seed ${seed}`);
  const policy = new ScriptedExpert({ tasks: [task], harnesses: [under ?? harness] });
  return { task, trajectory: await runEpisode({ policy, harness: under ?? harness, task }) };
}

/** The episode's messages with the last reply replaced. */
function withReply(messages: ChatMessage[], reply: string): ChatMessage[] {
  const index = messages.map((message) => message.role === 'assistant' && !message.tool_calls).lastIndexOf(true);
  return messages.map((message, position) => (position === index ? { role: 'assistant', content: reply } : message));
}

function couponMention(task: Task): string {
  const coupon = createWorld(task.room).activeCoupon;
  return coupon === undefined ? '' : `，先领${couponLabel(coupon)}券`;
}

describe('facts', () => {
  it('scores a correct price however it is written', async () => {
    const { task, trajectory } = await solved(
      'coupon_math',
      'facts-1',
      (entry) =>
        entry.turns[0].expect.facts[0].values![0] >= 100 && Number.isInteger(entry.turns[0].expect.facts[0].values![0]),
    );
    const price = task.turns[0].expect.facts[0].values![0];
    const chinese = toChineseNumber(price);
    const fullWidth = String(price).replace(/\d/g, (digit) => String.fromCharCode(digit.charCodeAt(0) + 0xfee0));
    for (const phrase of [
      `到手${price}元`,
      `到手¥${price}.00`,
      `到手价${chinese}块`,
      `只要${fullWidth}元`,
      `券后${price}块钱`,
    ]) {
      const reward = verifyEpisode({
        task,
        harness,
        messages: withReply(trajectory.messages, `宝宝们，${phrase}${couponMention(task)}`),
      });
      expect({ phrase, facts: reward.components.facts }).toEqual({ phrase, facts: 1 });
    }
  });

  it('takes points for a wrong price and flags the unsupported amount', async () => {
    const { task, trajectory } = await solved('coupon_math', 'facts-2');
    const price = task.turns[0].expect.facts[0].values![0];
    const reward = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `宝宝们，到手${price + 37}元${couponMention(task)}`),
    });
    expect(reward.components.facts).toBe(0);
    expect(reward.notes.join('\n')).toMatch(/missing 到手价[\s\S]*amounts nothing supports/);
    expect(reward.total).toBeLessThan(0.7);
  });

  it('does not read 没有货 as 有货, and accepts 卖完了 for a sold-out size', async () => {
    const { task, trajectory } = await solved(
      'stock_size',
      'facts-3',
      (entry) => entry.turns[0].intent.kind === 'stock' && entry.turns[0].expect.facts[0].label === '有货',
    );
    const mention = couponMention(task);
    expect(
      verifyEpisode({ task, harness, messages: withReply(trajectory.messages, `宝宝们，这个码现在没有货了${mention}`) })
        .components.facts,
    ).toBe(0);
    expect(
      verifyEpisode({ task, harness, messages: withReply(trajectory.messages, `亲，这个码还有现货，放心拍${mention}`) })
        .components.facts,
    ).toBe(1);
    const soldOut = await solved(
      'stock_size',
      'facts-4',
      (entry) => entry.turns[0].intent.kind === 'stock' && entry.turns[0].expect.facts[0].label === '已售罄',
    );
    expect(
      verifyEpisode({
        task: soldOut.task,
        harness,
        messages: withReply(soldOut.trajectory.messages, `宝宝们，这个已经卖完啦${couponMention(soldOut.task)}`),
      }).components.facts,
    ).toBe(1);
    expect(
      verifyEpisode({
        task: soldOut.task,
        harness,
        messages: withReply(soldOut.trajectory.messages, `宝宝们，有货的${couponMention(soldOut.task)}`),
      }).components.facts,
    ).toBe(0);
  });

  it('tells XL from XXL and accepts 2XL for XXL', async () => {
    const { task, trajectory } = await solved(
      'stock_size',
      'facts-5',
      (entry) =>
        entry.turns[0].intent.kind === 'size' &&
        entry.turns[0].expect.facts.length === 1 &&
        ['XL', 'XXL'].includes(entry.turns[0].expect.facts[0].accepted![2]),
    );
    const size = task.turns[0].expect.facts[0].accepted![2];
    const other = size === 'XL' ? 'XXL' : 'XL';
    const mention = couponMention(task);
    expect(
      verifyEpisode({ task, harness, messages: withReply(trajectory.messages, `宝宝们，建议拍${other}码${mention}`) })
        .components.facts,
    ).toBe(0);
    expect(
      verifyEpisode({
        task,
        harness,
        messages: withReply(trajectory.messages, `宝宝们，建议${size === 'XXL' ? '2XL' : 'xl'}${mention}`),
      }).components.facts,
    ).toBe(1);
  });

  it('requires admitting not knowing for out-of-catalog questions', async () => {
    const { task, trajectory } = await solved(
      'out_of_catalog',
      'facts-6',
      (entry) => entry.turns[0].intent.kind === 'unknown_item',
    );
    const mention = couponMention(task);
    expect(
      verifyEpisode({
        task,
        harness,
        messages: withReply(trajectory.messages, `宝宝们，直播间暂时没上这个，可以看看别的${mention}`),
      }).components.facts,
    ).toBe(1);
    const invented = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `宝宝们，有的，只要1999元${mention}`),
    });
    expect(invented.components.facts).toBe(0);
    expect(invented.notes.join('\n')).toContain('does not admit not knowing');
  });

  it('accepts policy facts in other words: 一年 for 12个月, 不支持无理由 for fresh food', async () => {
    const warranty = await solved(
      'shipping_after_sales',
      'facts-7',
      (entry) =>
        entry.turns[0].expect.facts[0].label === '保修期' && entry.turns[0].expect.facts[0].accepted!.includes('1年'),
    );
    expect(
      verifyEpisode({
        task: warranty.task,
        harness,
        messages: withReply(warranty.trajectory.messages, `宝宝们，整机保修一年哦${couponMention(warranty.task)}`),
      }).components.facts,
    ).toBe(1);
    const fresh = await solved(
      'shipping_after_sales',
      'facts-8',
      (entry) => entry.turns[0].expect.facts[0].label === '不支持无理由退货',
      undefined,
      600,
    );
    expect(
      verifyEpisode({
        task: fresh.task,
        harness,
        messages: withReply(fresh.trajectory.messages, `亲，生鲜不能无理由退哦，坏果包赔${couponMention(fresh.task)}`),
      }).components.facts,
    ).toBe(1);
    expect(
      verifyEpisode({
        task: fresh.task,
        harness,
        messages: withReply(fresh.trajectory.messages, `亲，支持7天无理由退货${couponMention(fresh.task)}`),
      }).components.facts,
    ).toBe(0);
  });
});

describe('tools', () => {
  it('needs the required call with the right canonical arguments', async () => {
    const { task, trajectory } = await solved(
      'coupon_math',
      'tools-1',
      (entry) =>
        entry.turns[0].intent.kind === 'final_price' && (entry.turns[0].intent as { quantity: number }).quantity > 1,
    );
    expect(verifyEpisode({ task, harness, messages: trajectory.messages }).components.tools).toBe(1);
    // The same reply without any tool call: the required quote is missing.
    const reply = trajectory.messages[trajectory.messages.length - 1];
    const noTools = [
      ...trajectory.messages.filter((message) => message.role === 'system' || message.role === 'user'),
      reply,
    ];
    const reward = verifyEpisode({ task, harness, messages: noTools });
    expect(reward.components.tools).toBe(0);
    expect(reward.notes.join('\n')).toContain('no call satisfied "算到手价"');
    // A quote for the wrong quantity does not count either.
    const wrongQuantity = trajectory.messages.map((message) =>
      message.role === 'assistant' && message.tool_calls
        ? {
            ...message,
            tool_calls: message.tool_calls.map((call) => ({
              ...call,
              function: {
                ...call.function,
                arguments: call.function.arguments.replace(/"quantity":\d+/, '"quantity":1'),
              },
            })),
          }
        : message,
    );
    expect(verifyEpisode({ task, harness, messages: wrongQuantity }).components.tools).toBe(0);
  });

  it('resolves calls through a renamed harness binding', async () => {
    const renamed = renameHarness(harness);
    const { task, trajectory } = await solved('shipping_after_sales', 'tools-2', () => true, renamed);
    expect(
      trajectory.messages.some(
        (message) => message.role === 'assistant' && message.tool_calls?.[0]?.function.name === 'policy_lookup',
      ),
    ).toBe(true);
    expect(verifyEpisode({ task, harness: renamed, messages: trajectory.messages }).components.tools).toBe(1);
    // Judged under the original harness the renamed calls are unknown tools.
    expect(verifyEpisode({ task, harness, messages: trajectory.messages }).components.tools).toBeLessThan(1);
  });
});

describe('compliance, hooks and format', () => {
  it('penalizes absolute claims and invented promises', async () => {
    const { task, trajectory } = await solved('price', 'rules-1');
    const mention = couponMention(task);
    const fact = task.turns[0].expect.facts[0].values![0];
    const clean = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `宝宝们，到手${fact}元${mention}`),
    });
    expect(clean.components.compliance).toBe(1);
    const claim = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `宝宝们，绝对划算，到手${fact}元${mention}`),
    });
    expect(claim.components.compliance).toBe(0.5);
    expect(claim.components.hooks).toBeLessThan(1);
    const promise = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `宝宝们，到手${fact}元，永久保修${mention}`),
    });
    expect(promise.components.compliance).toBe(0.5);
    expect(promise.notes.join('\n')).toContain('invented promise');
  });

  it('checks length, tone markers and the coupon mention in force', async () => {
    const { task, trajectory } = await solved(
      'price',
      'rules-2',
      (entry) => createWorld(entry.room).activeCoupon !== undefined,
    );
    const coupon = createWorld(task.room).activeCoupon!;
    const fact = task.turns[0].expect.facts[0].values![0];
    const good = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, `家人们，到手${fact}元，记得领${couponLabel(coupon)}的券`),
    });
    expect(good.components.hooks).toBe(1);
    const bare = verifyEpisode({ task, harness, messages: withReply(trajectory.messages, `到手${fact}元`) });
    expect(bare.notes.join('\n')).toMatch(/persona_tone[\s\S]*coupon_mention|coupon_mention[\s\S]*persona_tone/);
    expect(bare.components.hooks).toBeCloseTo(0.5, 5);
    const long = verifyEpisode({
      task,
      harness,
      messages: withReply(
        trajectory.messages,
        `家人们，到手${fact}元，${couponLabel(coupon)}${'，这款真的很值得'.repeat(8)}`,
      ),
    });
    expect(long.notes.join('\n')).toMatch(/reply_length: \d+ chars > 60/);
  });

  it('flags tool-call syntax, JSON, markup and tool names in the spoken reply', async () => {
    const { task, trajectory } = await solved('chit_chat', 'format-1');
    const mention = couponMention(task);
    expect(
      verifyEpisode({ task, harness, messages: withReply(trajectory.messages, `宝宝们，欢迎欢迎${mention}`) })
        .components.format,
    ).toBe(1);
    for (const leak of [
      '<tool_call>{"name": "get_item_detail"}</tool_call>',
      '{"item_id": "1"}',
      '**欢迎**',
      '我用 get_live_script 查一下',
    ]) {
      const reward = verifyEpisode({
        task,
        harness,
        messages: withReply(trajectory.messages, `宝宝们，${leak}${mention}`),
      });
      expect({ leak, format: reward.components.format < 1 }).toEqual({ leak, format: true });
    }
  });
});

describe('the reward', () => {
  it('fits the trajectory Reward schema, scores an unanswered turn 0 and honours weights', async () => {
    const { task, trajectory } = await solved('multi_turn', 'reward-1');
    const full = verifyEpisode({ task, harness, messages: trajectory.messages });
    expect(rewardSchema.parse(full)).toEqual(full);
    expect(full.total).toBe(1);
    const firstTurn = trajectory.messages.slice(
      0,
      trajectory.messages.findIndex(
        (message, index) =>
          index > 0 &&
          message.role === 'user' &&
          trajectory.messages.slice(0, index).some((earlier) => earlier.role === 'assistant' && !earlier.tool_calls),
      ),
    );
    const partial = verifyEpisode({ task, harness, messages: firstTurn });
    expect(partial.total).toBeCloseTo(1 / task.turns.length, 3);
    expect(partial.notes).toContain(`turn ${task.turns.length}: no reply`);
    const onlyFormat = verifyEpisode({
      task,
      harness,
      messages: withReply(trajectory.messages, '<b>hi</b>'),
      weights: { facts: 0, tools: 0, compliance: 0, hooks: 0, format: 1 },
    });
    expect(onlyFormat.total).toBeLessThan(1);
  });
});

function toChineseNumber(value: number): string {
  const digits = '零一二三四五六七八九';
  const units = ['', '十', '百', '千'];
  const text = [...String(value)]
    .reverse()
    .map((digit, index) => (digit === '0' ? '零' : `${digits[Number(digit)]}${units[index]}`))
    .reverse()
    .join('');
  return text.replace(/零+/g, '零').replace(/零$/, '');
}
