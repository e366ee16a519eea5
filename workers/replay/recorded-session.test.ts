import { multiTurnSessions, syntheticSessions } from './testing/synthetic-sessions';
import { parseRecordedSession } from './recorded-session';

describe('parseRecordedSession', () => {
  const [trajectory] = syntheticSessions({ count: 1, toolMs: 35, completionTokens: 9 });

  it('plans one call per assistant message with its context, think time and recorded figures', () => {
    const parsed = parseRecordedSession(trajectory, 'file:///s.jsonl: line 1');
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.session.calls).toEqual([
      {
        messageIndex: 2,
        thinkMsAfter: 35,
        turnIndex: 0,
        endsTurn: false,
        toolNames: ['get_item_detail'],
        recordedOutputTokens: 9,
        recordedTtftMs: 120,
        recordedE2eMs: 300,
      },
      {
        messageIndex: 4,
        thinkMsAfter: 0,
        turnIndex: 0,
        endsTurn: true,
        toolNames: [],
        recordedOutputTokens: 9,
        recordedTtftMs: 110,
        recordedE2eMs: 320,
      },
    ]);
    expect(parsed.session).toMatchObject({ id: 'session-0000', taskId: 'task-0', source: 'file:///s.jsonl: line 1' });
  });

  it('accepts a production trace with only messages and call timings', () => {
    const trace = {
      id: 'prod-1',
      messages: trajectory.messages,
      calls: [{ messageIndex: 2, toolMs: 80 }, { messageIndex: 4 }],
    };
    const parsed = parseRecordedSession(trace, 'trace');
    expect(parsed.ok && parsed.session.calls.map((call) => call.thinkMsAfter)).toEqual([80, 0]);
    // No harness: not a simulator session, so its recorded tool times stand.
    expect(parsed.ok && parsed.session.simulator).toBe(false);
  });

  it('splits a multi-turn session into viewer turns, each ending at its final answer', () => {
    const [session] = multiTurnSessions({ count: 1 });
    const parsed = parseRecordedSession(session, 'turns');
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.session.simulator).toBe(true);
    expect(
      parsed.session.calls.map((call) => [call.messageIndex, call.turnIndex, call.endsTurn, call.toolNames.join('+')]),
    ).toEqual([
      [2, 0, false, 'get_item_detail'],
      [4, 0, true, ''],
      [6, 1, true, ''],
      [8, 2, false, 'get_sku_stock+get_coupons'],
      [11, 2, false, 'get_item_detail'],
      [13, 2, true, ''],
    ]);
  });

  it.each([
    ['not an object', 'hello', 'malformed_record', /not a recorded session/],
    ['no calls', { ...trajectory, calls: [] }, 'missing_timings', /no `calls`/],
    [
      'an assistant without a call record',
      { ...trajectory, calls: [trajectory.calls[0]] },
      'missing_timings',
      /messages\[4\] has no calls\[\] record/,
    ],
    [
      'a call record pointing at a user message',
      { ...trajectory, calls: [...trajectory.calls, { messageIndex: 1, toolMs: 0 }] },
      'malformed_record',
      /messageIndex 1/,
    ],
    [
      'no think time after a tool call',
      { ...trajectory, calls: [{ messageIndex: 2 }, trajectory.calls[1]] },
      'missing_timings',
      /no toolMs/,
    ],
    [
      'a tool result for no call',
      {
        ...trajectory,
        messages: trajectory.messages.map((message, index) =>
          index === 3 ? { ...message, tool_call_id: 'x' } : message,
        ),
      },
      'malformed_record',
      /"x"/,
    ],
  ])('skips a record with %s, saying why', (_label, record, reason, detail) => {
    const parsed = parseRecordedSession(record, 'file:///s.jsonl: line 7');
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.unreplayable.reason).toBe(reason);
    expect(parsed.unreplayable.detail).toMatch(detail);
    expect(parsed.unreplayable.source).toBe('file:///s.jsonl: line 7');
  });
});
