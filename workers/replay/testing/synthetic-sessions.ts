import { TRAJECTORY_SCHEMA_VERSION, type Trajectory } from '../../../shared/trajectory/trajectory';

export interface SyntheticSessionOptions {
  /** Sessions to make. */
  count: number;
  /** Recorded tool time after the tool-calling turn, ms. Default 50. */
  toolMs?: number;
  /** Recorded completion tokens of each call. Default 16. */
  completionTokens?: number;
  /** Id prefix. Default `session`. */
  prefix?: string;
}

/**
 * Recorded sessions in the collect stage's trajectory format for replay tests and the
 * benchmark: a viewer asks, the host calls a tool, reads its result and answers (two model
 * calls with a recorded think time between them).
 */
export function syntheticSessions(options: SyntheticSessionOptions): Trajectory[] {
  const toolMs = options.toolMs ?? 50;
  const completionTokens = options.completionTokens ?? 16;
  return Array.from({ length: options.count }, (_, index) => {
    const id = `${options.prefix ?? 'session'}-${String(index).padStart(4, '0')}`;
    const callId = `call_recorded_${index}`;
    return {
      schemaVersion: TRAJECTORY_SCHEMA_VERSION,
      id,
      taskId: `task-${index}`,
      category: 'price',
      messages: [
        { role: 'system', content: 'You are the host of a live-stream sales room. Use tools for prices.' },
        { role: 'user', content: `How much is item ${index} today?` },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: callId,
              type: 'function',
              function: { name: 'get_item_detail', arguments: JSON.stringify({ item_id: `item-${index}` }) },
            },
          ],
        },
        {
          role: 'tool',
          tool_call_id: callId,
          content: JSON.stringify({ item_id: `item-${index}`, price: 100 + index }),
        },
        { role: 'assistant', content: `Item ${index} is ${100 + index} yuan today.` },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_item_detail',
            description: 'Item details',
            parameters: { type: 'object', properties: { item_id: { type: 'string' } }, required: ['item_id'] },
          },
        },
      ],
      harness: { id: 'synthetic', version: '1', hash: 'synthetic' },
      model: { provider: 'scripted', id: 'expert', sampling: {}, simulated: true },
      calls: [
        {
          messageIndex: 2,
          startedAt: 0,
          queueMs: 0,
          ttftMs: 120,
          e2eMs: 300,
          promptTokens: 60,
          completionTokens,
          finishReason: 'tool_calls',
          attempts: 1,
          toolMs,
        },
        {
          messageIndex: 4,
          startedAt: 400,
          queueMs: 0,
          ttftMs: 110,
          e2eMs: 320,
          promptTokens: 90,
          completionTokens,
          finishReason: 'stop',
          attempts: 1,
          toolMs: 0,
        },
      ],
      issues: [],
      status: 'ok',
      reward: { total: 1, components: {}, notes: [] },
      sampleIndex: 0,
      meta: {},
    };
  });
}

/**
 * Multi-turn sessions for viewer-turn tests: per session three viewer turns. Turn 0: one tool
 * step, then the answer; turn 1: a direct answer; turn 2: two tool steps (one asking for two tools
 * at once), then the answer. Six model calls, three final answers. `production: true` leaves out
 * the harness, as a production trace would (its recorded tool times stand).
 */
export function multiTurnSessions(options: {
  count: number;
  toolMs?: number;
  prefix?: string;
  production?: boolean;
}): Trajectory[] {
  const toolMs = options.toolMs ?? 50;
  return Array.from({ length: options.count }, (_, index) => {
    const id = `${options.prefix ?? 'turns'}-${String(index).padStart(4, '0')}`;
    const call = (suffix: string, name: string) => ({
      id: `call_${id}_${suffix}`,
      type: 'function' as const,
      function: { name, arguments: JSON.stringify({ item_id: `item-${index}` }) },
    });
    const detail = call('a', 'get_item_detail');
    const stock = call('b', 'get_sku_stock');
    const coupon = call('c', 'get_coupons');
    const detailAgain = call('d', 'get_item_detail');
    const tools = ['get_item_detail', 'get_sku_stock', 'get_coupons'].map((name) => ({
      type: 'function' as const,
      function: {
        name,
        description: name,
        parameters: { type: 'object', properties: { item_id: { type: 'string' } }, required: ['item_id'] },
      },
    }));
    const timing = (messageIndex: number, stepToolMs: number) => ({
      messageIndex,
      startedAt: 0,
      queueMs: 0,
      ttftMs: 100,
      e2eMs: 300,
      promptTokens: 60,
      completionTokens: 16,
      finishReason: 'stop',
      attempts: 1,
      toolMs: stepToolMs,
    });
    const trajectory: Trajectory = {
      schemaVersion: TRAJECTORY_SCHEMA_VERSION,
      id,
      taskId: `task-${index}`,
      category: 'price',
      messages: [
        { role: 'system', content: `You are the host of live room ${id}. Use tools for prices.` },
        { role: 'user', content: `How much is item ${index}?` },
        { role: 'assistant', content: null, tool_calls: [detail] },
        { role: 'tool', tool_call_id: detail.id, content: '{"price": 100}' },
        { role: 'assistant', content: `Item ${index} is 100 yuan.` },
        { role: 'user', content: 'Does it come in blue?' },
        { role: 'assistant', content: 'Yes, in blue and grey.' },
        { role: 'user', content: 'Any coupon for size M?' },
        { role: 'assistant', content: null, tool_calls: [stock, coupon] },
        { role: 'tool', tool_call_id: stock.id, content: '{"M": 3}' },
        { role: 'tool', tool_call_id: coupon.id, content: '{"coupon": 20}' },
        { role: 'assistant', content: null, tool_calls: [detailAgain] },
        { role: 'tool', tool_call_id: detailAgain.id, content: '{"price": 100}' },
        { role: 'assistant', content: 'Size M is in stock and a 20 yuan coupon applies.' },
      ],
      tools,
      harness: { id: 'synthetic', version: '1', hash: 'synthetic' },
      model: { provider: 'scripted', id: 'expert', sampling: {}, simulated: true },
      calls: [timing(2, toolMs), timing(4, 0), timing(6, 0), timing(8, toolMs), timing(11, toolMs), timing(13, 0)],
      issues: [],
      status: 'ok',
      reward: { total: 1, components: {}, notes: [] },
      sampleIndex: 0,
      meta: {},
    };
    if (options.production) delete (trajectory as Partial<Trajectory>).harness;
    return trajectory;
  });
}
