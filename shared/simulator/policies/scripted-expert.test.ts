import type { Harness } from '../../harness/harness-types';
import { loadHarness } from '../../harness/load-harness';
import { sampleHarnessDirectory } from '../../harness/sample-harness';
import type { ChatRequest, ChatResponse, ModelClient } from '../../models/model-client';
import { createModelClient } from '../../models/model-registry';
import type { ChatMessage } from '../../trajectory/messages';
import { runEpisode } from '../agent-loop';
import { generateTasks } from '../tasks/generate-tasks';
import type { Task } from '../tasks/task-schema';
import { renameHarness } from '../testing/renamed-harness';
import { createModelViewer } from '../viewer/viewer';
import { scriptedServiceKeys } from './scripted-adapter';
import { ScriptedExpert } from './scripted-expert';
import { StochasticPolicy } from './stochastic-policy';

let harness: Harness;
let renamed: Harness;
let tasks: Task[];

beforeAll(async () => {
  harness = await loadHarness(sampleHarnessDirectory());
  renamed = renameHarness(harness);
  tasks = generateTasks({ count: 300, seed: 'expert-test', world: { itemCount: 800 } });
});

const toolResults = (messages: ChatMessage[]) =>
  messages.filter((message) => message.role === 'tool').map((message) => message.content);

describe('ScriptedExpert', () => {
  it('reaches reward >= 0.95 on at least 95% of 300 generated tasks', async () => {
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    const rewards: number[] = [];
    for (const task of tasks) rewards.push((await runEpisode({ policy: expert, harness, task })).reward.total);
    expect(rewards.filter((reward) => reward >= 0.95).length / rewards.length).toBeGreaterThanOrEqual(0.95);
  });

  it('plays the same episodes under a renamed harness: renamed calls, same tool results, same reward', async () => {
    const expert = new ScriptedExpert({ tasks, harnesses: [harness, renamed] });
    for (const task of tasks.slice(0, 60)) {
      const original = await runEpisode({ policy: expert, harness, task });
      const variant = await runEpisode({ policy: expert, harness: renamed, task });
      const names = variant.messages.flatMap((message) =>
        message.role === 'assistant' ? (message.tool_calls ?? []).map((entry) => entry.function.name) : [],
      );
      expect(names.every((name) => renamed.tools.some((tool) => tool.name === name))).toBe(true);
      expect(toolResults(variant.messages)).toEqual(toolResults(original.messages));
      expect(variant.reward).toEqual(original.reward);
    }
  });

  it('calls independent tools in parallel and resolves link numbers through the live script', async () => {
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    const task = tasks.find(
      (entry) =>
        entry.category === 'multi_question' &&
        entry.turns[0].intent.kind === 'multi' &&
        entry.turns[0].intent.parts[0].kind === 'price' &&
        'ref' in entry.turns[0].intent.parts[0] &&
        entry.turns[0].intent.parts[0].ref.kind === 'link',
    )!;
    const trajectory = await runEpisode({ policy: expert, harness, task });
    const batches = trajectory.messages.flatMap((message) =>
      message.role === 'assistant' && message.tool_calls
        ? [message.tool_calls.map((entry) => entry.function.name)]
        : [],
    );
    expect(batches[0]).toEqual(['get_live_script']);
    expect(batches[1].length).toBe(2);
    expect(trajectory.reward.total).toBe(1);
  });

  it('leaves out an optional argument the harness tool has no parameter for, and never reads a failed call as facts', async () => {
    // A policy tool without item_id answers for the item on screen; the expert must call it with the topic alone.
    const withoutItemId: Harness = {
      ...harness,
      tools: harness.tools.map((tool) => {
        if (tool.binding.capability !== 'policy') return tool;
        const { item_id: _itemId, ...properties } = tool.parameters.properties as Record<string, unknown>;
        return { ...tool, parameters: { ...tool.parameters, properties } };
      }),
    };
    const onScreen = generateTasks({
      count: 40,
      seed: 'expert-policy',
      categoryWeights: Object.fromEntries(
        ['price', 'spec', 'stock_size', 'coupon_math', 'comparison', 'chit_chat', 'compliance_trap', 'multi_question']
          .concat(['multi_turn', 'out_of_catalog'])
          .map((category) => [category, 0]),
      ),
      references: { onScreen: 1 },
    });
    expect(onScreen.every((task) => task.category === 'shipping_after_sales')).toBe(true);
    const expert = new ScriptedExpert({ tasks: onScreen, harnesses: [withoutItemId] });
    for (const task of onScreen) {
      const episode = await runEpisode({ policy: expert, harness: withoutItemId, task });
      const calls = episode.messages.flatMap((message) =>
        message.role === 'assistant'
          ? (message.tool_calls ?? []).map((call) => JSON.parse(call.function.arguments))
          : [],
      );
      expect(calls.length).toBeGreaterThan(0);
      for (const args of calls) expect(Object.keys(args)).toEqual(['topic']);
      expect(toolResults(episode.messages).some((result) => result.includes('"error"'))).toBe(false);
      expect(episode.reward.components.tools).toBe(1);
    }
    // A tool the expert cannot call correctly (a required argument it does not know): the reply
    // says the host cannot check, never a figure read out of the error ("满NaN元包邮").
    const requiresUnknown: Harness = {
      ...harness,
      tools: harness.tools.map((tool) =>
        tool.binding.capability !== 'policy'
          ? tool
          : {
              ...tool,
              parameters: {
                ...tool.parameters,
                properties: { ...(tool.parameters.properties as object), shop_code: { type: 'string' } },
                required: ['topic', 'shop_code'],
              },
            },
      ),
    };
    const failing = new ScriptedExpert({ tasks: onScreen, harnesses: [requiresUnknown] });
    for (const task of onScreen.slice(0, 10)) {
      const episode = await runEpisode({ policy: failing, harness: requiresUnknown, task });
      const replies = episode.messages.flatMap((message) =>
        message.role === 'assistant' && message.content !== null ? [message.content] : [],
      );
      expect(toolResults(episode.messages).some((result) => result.includes('"error"'))).toBe(true);
      expect(replies.join('\n')).not.toMatch(/NaN|undefined/);
      expect(replies.join('\n')).toContain('查不到');
    }
  });

  it('refuses requests from a harness or task it was not given', async () => {
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    await expect(runEpisode({ policy: expert, harness: renamed, task: tasks[0] })).resolves.toMatchObject({
      status: 'model_error',
      statusReason: expect.stringMatching(/^\[EXPERT_UNKNOWN_HARNESS\]/),
    });
    const stranger = generateTasks({ count: 1, seed: 'stranger', world: { itemCount: 100 } })[0];
    await expect(runEpisode({ policy: expert, harness, task: stranger })).resolves.toMatchObject({
      statusReason: expect.stringMatching(/^\[EXPERT_UNKNOWN_TASK\]/),
    });
  });
});

describe('StochasticPolicy', () => {
  it('is labelled a simulation, deterministic under its seed, and spreads rewards', async () => {
    const policy = new StochasticPolicy({
      seed: 7,
      tasks,
      harnesses: [harness],
      errorRates: { wrongArgument: 0.2, hallucinatedNumber: 0.3, bannedWord: 0.2, overlongReply: 0.2 },
    });
    const again = new StochasticPolicy({ seed: 7, tasks, harnesses: [harness], errorRates: policy.errorRates });
    const rewards: number[] = [];
    let issues = 0;
    for (const task of tasks.slice(0, 80)) {
      const trajectory = await runEpisode({ policy, harness, task });
      expect(JSON.stringify(await runEpisode({ policy: again, harness, task }))).toBe(JSON.stringify(trajectory));
      expect(trajectory.model).toMatchObject({
        provider: 'scripted',
        id: 'scripted-stochastic (simulation policy)',
        simulated: true,
      });
      rewards.push(trajectory.reward.total);
      issues += trajectory.issues.length;
    }
    expect(Math.min(...rewards)).toBeLessThan(0.8);
    expect(rewards.filter((reward) => reward === 1).length).toBeGreaterThan(10);
    expect(issues).toBeGreaterThan(0);
  });

  it('with every rate at 0 behaves exactly like the expert', async () => {
    const zero = new StochasticPolicy({
      seed: 1,
      tasks,
      harnesses: [harness],
      errorRates: {
        wrongTool: 0,
        wrongArgument: 0,
        malformedJson: 0,
        hallucinatedNumber: 0,
        bannedWord: 0,
        overlongReply: 0,
      },
    });
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    for (const task of tasks.slice(0, 20)) {
      expect((await runEpisode({ policy: zero, harness, task })).messages).toEqual(
        (await runEpisode({ policy: expert, harness, task })).messages,
      );
    }
  });
});

describe('the scripted model adapter', () => {
  it('builds the expert or the stochastic policy from a model config', () => {
    const services = { [scriptedServiceKeys.tasks]: tasks, [scriptedServiceKeys.harnesses]: [harness] };
    expect(createModelClient({ adapter: 'scripted' }, { services })).toBeInstanceOf(ScriptedExpert);
    const stochastic = createModelClient(
      { adapter: 'scripted', policy: 'stochastic', seed: 3, errorRates: { bannedWord: 0.5 } },
      { services },
    );
    expect(stochastic).toBeInstanceOf(StochasticPolicy);
    expect((stochastic as StochasticPolicy).errorRates.bannedWord).toBe(0.5);
    expect(() => createModelClient({ adapter: 'scripted' })).toThrow(/\[SCRIPTED_POLICY_UNBOUND\]/);
    expect(() => createModelClient({ adapter: 'scripted', policy: 'genius' }, { services })).toThrow(
      /\[MODEL_BAD_CONFIG\][\s\S]*policy/,
    );
  });
});

describe('the model-driven viewer', () => {
  class CannedViewerModel implements ModelClient {
    readonly specificationVersion = 'v1' as const;
    readonly provider = 'test';
    readonly modelId = 'viewer-model';
    prompts: string[] = [];
    constructor(private readonly text: string | Error) {}
    async chat(request: ChatRequest): Promise<ChatResponse> {
      this.prompts.push(request.messages[request.messages.length - 1].content ?? '');
      if (this.text instanceof Error) throw this.text;
      return {
        message: { role: 'assistant', content: this.text },
        finishReason: 'stop',
        usage: { promptTokens: 1, completionTokens: 1 },
        timings: { startedAt: 0, queueMs: 0, ttftMs: 1, e2eMs: 1 },
        model: this.modelId,
        attempts: 1,
      };
    }
  }

  it('asks the model for the follow-up and falls back to the task wording when it fails', async () => {
    const task = tasks.find((entry) => entry.category === 'multi_turn')!;
    const model = new CannedViewerModel('“那这个能便宜点吗”');
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    const trajectory = await runEpisode({
      policy: expert,
      harness,
      task,
      viewer: createModelViewer({ client: model }),
      maxTurns: 2,
    });
    expect(
      trajectory.messages.filter((message) => message.role === 'user')[1].content.startsWith('那这个能便宜点吗'),
    ).toBe(true);
    expect(model.prompts[0]).toContain(`参考说法：${task.turns[1].message}`);
    expect(trajectory.meta.viewer).toEqual({ kind: 'model:viewer-model', sources: ['model'] });
    const failing = await runEpisode({
      policy: expert,
      harness,
      task,
      viewer: createModelViewer({ client: new CannedViewerModel(new Error('down')) }),
      maxTurns: 2,
    });
    expect(
      failing.messages.filter((message) => message.role === 'user')[1].content.startsWith(task.turns[1].message),
    ).toBe(true);
    expect(failing.meta.viewer).toEqual({ kind: 'model:viewer-model', sources: ['fallback'] });
  });
});
