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
        { role: 'assistant', content: null, tool_calls: [{ id: callId, type: 'function', function: { name: 'get_item_detail', arguments: JSON.stringify({ item_id: `item-${index}` }) } }] },
        { role: 'tool', tool_call_id: callId, content: JSON.stringify({ item_id: `item-${index}`, price: 100 + index }) },
        { role: 'assistant', content: `Item ${index} is ${100 + index} yuan today.` },
      ],
      tools: [{ type: 'function', function: { name: 'get_item_detail', description: 'Item details', parameters: { type: 'object', properties: { item_id: { type: 'string' } }, required: ['item_id'] } } }],
      harness: { id: 'synthetic', version: '1', hash: 'synthetic' },
      model: { provider: 'scripted', id: 'expert', sampling: {}, simulated: true },
      calls: [
        { messageIndex: 2, startedAt: 0, queueMs: 0, ttftMs: 120, e2eMs: 300, promptTokens: 60, completionTokens, finishReason: 'tool_calls', attempts: 1, toolMs },
        { messageIndex: 4, startedAt: 400, queueMs: 0, ttftMs: 110, e2eMs: 320, promptTokens: 90, completionTokens, finishReason: 'stop', attempts: 1, toolMs: 0 },
      ],
      issues: [],
      status: 'ok',
      reward: { total: 1, components: {}, notes: [] },
      sampleIndex: 0,
      meta: {},
    };
  });
}
