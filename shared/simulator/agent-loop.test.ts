import { TransientError } from '../errors';
import type { Harness } from '../harness/harness-types';
import { loadHarness } from '../harness/load-harness';
import { sampleHarnessDirectory } from '../harness/sample-harness';
import type { ChatRequest, ChatResponse, ModelClient } from '../models/model-client';
import type { AssistantMessage } from '../trajectory/messages';
import { trajectorySchema } from '../trajectory/trajectory';
import { runEpisode } from './agent-loop';
import { ScriptedExpert } from './policies/scripted-expert';
import { generateTasks } from './tasks/generate-tasks';
import type { Task } from './tasks/task-schema';
import { createScriptedViewer } from './viewer/viewer';
import { createWorld } from './world/world';

/** A policy that plays back assistant messages in order and keeps the requests it saw. */
class ReplayPolicy implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  readonly provider = 'test';
  readonly modelId = 'replay';
  readonly requests: ChatRequest[] = [];
  constructor(private readonly script: Array<AssistantMessage | Error>) {}
  async chat(request: ChatRequest): Promise<ChatResponse> {
    this.requests.push({ ...request, messages: [...request.messages] });
    const next = this.script[Math.min(this.requests.length - 1, this.script.length - 1)];
    if (next instanceof Error) throw next;
    return {
      message: next,
      finishReason: next.tool_calls ? 'tool_calls' : 'stop',
      usage: { promptTokens: 100, completionTokens: 10 },
      timings: { startedAt: 0, queueMs: 2, ttftMs: 40, e2eMs: 90 },
      model: 'replay',
      attempts: 1,
    };
  }
}

const call = (id: string, name: string, args: unknown) => ({
  id,
  type: 'function' as const,
  function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
});

let harness: Harness;
let tasks: Task[];
let priceTask: Task;

beforeAll(async () => {
  harness = await loadHarness(sampleHarnessDirectory());
  tasks = generateTasks({ count: 80, seed: 'loop', world: { itemCount: 500 } });
  priceTask = tasks.find(
    (task) =>
      task.category === 'price' &&
      task.turns[0].intent.kind === 'price' &&
      task.turns[0].intent.ref.kind === 'featured' &&
      createWorld(task.room).activeCoupon !== undefined,
  )!;
});

describe('runEpisode', () => {
  it('renders the harness, injects hooks, runs parallel tool calls and scores the reply', async () => {
    const itemId = priceTask.room.featuredItemId!;
    const policy = new ReplayPolicy([
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          call('a', 'quote_final_price', { item_id: itemId }),
          call('b', 'get_promotions', { item_id: itemId }),
        ],
      },
      { role: 'assistant', content: '宝宝们，这就给你看' },
    ]);
    const trajectory = await runEpisode({ policy, harness, task: priceTask });
    expect(trajectorySchema.parse(trajectory)).toEqual(trajectory);
    const [system, ...rest] = trajectory.messages;
    expect(system.role).toBe('system');
    expect(system.content).toContain('## 必须遵守的约束');
    expect(rest[0]).toMatchObject({ role: 'system', content: expect.stringContaining('本场主推款') });
    expect(rest[1]).toMatchObject({
      role: 'user',
      content: `${priceTask.turns[0].message}\n（提示：直播节奏快，本条回复不超过60个字。）`,
    });
    expect(rest[2]).toMatchObject({ role: 'system', content: expect.stringContaining('活动进行中') });
    expect(
      trajectory.messages
        .filter((message) => message.role === 'tool')
        .map((message) => (message as { tool_call_id: string }).tool_call_id),
    ).toEqual(['a', 'b']);
    // The after_tool_result hook follows the batch of tool results.
    const lastTool = trajectory.messages.map((message) => message.role).lastIndexOf('tool');
    expect(trajectory.messages[lastTool + 1]).toMatchObject({
      role: 'system',
      content: expect.stringContaining('工具结果已返回'),
    });
    expect(trajectory.calls).toHaveLength(2);
    expect(trajectory.calls[0].toolMs).toBeGreaterThan(0);
    expect(trajectory.issues).toEqual([]);
    expect(trajectory.tools.map((tool) => tool.function.name)).toEqual(harness.tools.map((tool) => tool.name));
    expect(policy.requests[0].tools).toEqual(trajectory.tools);
    // The reply omitted the price and the coupon: the verifier says so.
    expect(trajectory.reward.components.facts).toBe(0);
    expect(trajectory.reward.notes.join('\n')).toContain('coupon_mention');
  });

  it('records malformed calls as issues, answers them with tool errors and keeps going', async () => {
    const policy = new ReplayPolicy([
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          call('x1', 'get_item_detail', '{"item_id": '),
          call('x2', 'get_weather', {}),
          call('x3', 'get_sku_stock', { item_id: 5 }),
          call('x4', 'get_item_detail', { item_id: 'ghost' }),
        ],
      },
      { role: 'assistant', content: '宝宝们，我再确认一下' },
    ]);
    const trajectory = await runEpisode({ policy, harness, task: priceTask });
    expect(trajectory.status).toBe('ok');
    expect(trajectory.issues.map((issue) => [issue.toolCallId, issue.kind])).toEqual([
      ['x1', 'invalid_json'],
      ['x2', 'unknown_tool'],
      ['x3', 'schema_violation'],
      ['x4', 'tool_error'],
    ]);
    const results = trajectory.messages
      .filter((message) => message.role === 'tool')
      .map((message) => JSON.parse(message.content).error.code);
    expect(results).toEqual(['INVALID_JSON', 'UNKNOWN_TOOL', 'SCHEMA_VIOLATION', 'ITEM_NOT_FOUND']);
    expect(trajectory.reward.notes.join('\n')).toContain('3 malformed and 1 failed calls');
  });

  it('stops at the step limit with status step_limit', async () => {
    const policy = new ReplayPolicy([
      { role: 'assistant', content: null, tool_calls: [call('loop', 'get_live_script', {})] },
    ]);
    const trajectory = await runEpisode({ policy, harness, task: priceTask, maxSteps: 3 });
    expect(trajectory.status).toBe('step_limit');
    expect(trajectory.statusReason).toBe('no reply after 3 model calls in turn 1');
    expect(policy.requests).toHaveLength(3);
    expect(trajectory.reward.total).toBe(0);
  });

  it('ends with status model_error when the model fails, keeping what happened before', async () => {
    const policy = new ReplayPolicy([
      { role: 'assistant', content: null, tool_calls: [call('a', 'get_live_script', {})] },
      new TransientError('MODEL_UNAVAILABLE', 'server returned 503 three times'),
    ]);
    const trajectory = await runEpisode({ policy, harness, task: priceTask });
    expect(trajectory.status).toBe('model_error');
    expect(trajectory.statusReason).toBe('[MODEL_UNAVAILABLE] server returned 503 three times');
    expect(trajectory.messages.some((message) => message.role === 'tool')).toBe(true);
  });

  it('plays multi-turn tasks with viewer follow-ups and is deterministic', async () => {
    const task = tasks.find((entry) => entry.category === 'multi_turn')!;
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    const viewer = createScriptedViewer({ seed: 'v1' });
    const first = await runEpisode({ policy: expert, harness, task, viewer, seed: 's' });
    const second = await runEpisode({ policy: expert, harness, task, viewer, seed: 's' });
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    expect(first.messages.filter((message) => message.role === 'user')).toHaveLength(task.turns.length);
    expect(first.meta.viewer).toEqual({ kind: 'scripted', sources: task.turns.slice(1).map(() => 'scripted') });
    expect(first.reward.total).toBeGreaterThanOrEqual(0.95);
    expect(first.model).toEqual({ provider: 'scripted', id: 'scripted-expert', sampling: {}, simulated: true });
    const session = first.meta.session!;
    expect(session.endedAt - session.startedAt).toBe(session.modelMs + session.toolMs);
    const oneTurn = await runEpisode({ policy: expert, harness, task, maxTurns: 1 });
    expect(oneTurn.messages.filter((message) => message.role === 'user')).toHaveLength(1);
  });
});
