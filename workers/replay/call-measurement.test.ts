import type { ChatResponse } from '../../shared/models/model-client';
import { loadChatTokenizer } from '../../shared/text/load-chat-tokenizer';
import { failedCallRecord, outputTokensOf, succeededCallRecord } from './call-measurement';
import { HatError } from '../../shared/errors';

const placement = {
  sessionId: 's',
  sessionIndex: 3,
  callIndex: 1,
  messageIndex: 4,
  part: 0,
  intendedMs: 1000,
  dispatchMs: 1002,
  endMs: 1450,
  thinkMs: 30,
};

function response(overrides: {
  completionTokens: number;
  estimated?: boolean;
  ttftMs?: number;
  e2eMs?: number;
  queueMs?: number;
  retryMs?: number;
  content?: string;
}): ChatResponse {
  return {
    message: { role: 'assistant', content: overrides.content ?? 'ok' },
    finishReason: 'stop',
    usage: {
      promptTokens: 50,
      completionTokens: overrides.completionTokens,
      ...(overrides.estimated ? { estimated: true } : {}),
    },
    timings: {
      startedAt: 0,
      queueMs: overrides.queueMs ?? 5,
      retryMs: overrides.retryMs ?? 0,
      ttftMs: overrides.ttftMs ?? 100,
      e2eMs: overrides.e2eMs ?? 400,
      itlMs: [],
      chunkCount: 3,
    },
    model: 'm',
    attempts: 1,
  };
}

describe('call records', () => {
  it('compute TPOT = (E2EL - TTFT) / (tokens - 1) only above one token, and the intended-time clock', () => {
    const record = succeededCallRecord(placement, response({ completionTokens: 31, retryMs: 10 }));
    expect(record).toMatchObject({
      status: 'ok',
      ttftMs: 100,
      e2elMs: 400,
      tpotMs: 10,
      outputTokens: 31,
      outputTokensSource: 'usage',
      sentMs: 1017,
      scheduleLagMs: 2,
      ttftFromIntendedMs: 117,
      e2elFromIntendedMs: 417,
    });
    // Own time: 448 ms from dispatch to end, minus 10 retry, 5 gate and 400 streaming = 33, plus 2 of lag.
    expect(record.clientOverheadMs).toBeCloseTo(35, 9);
    expect(succeededCallRecord(placement, response({ completionTokens: 1 })).tpotMs).toBeUndefined();
  });

  it('retokenize the output when the server sent no usage, and say so', async () => {
    const tokenizer = await loadChatTokenizer({ preset: 'qwen3' });
    const counter = { count: (text: string) => tokenizer.encode(text).length };
    const text = 'The coat is 299 yuan today.';
    const estimated = response({ completionTokens: 3, estimated: true, content: text });
    expect(outputTokensOf(estimated, counter)).toEqual({ count: tokenizer.encode(text).length, source: 'tokenizer' });
    expect(outputTokensOf(estimated)).toEqual({ count: 3, source: 'chunks' });
    expect(outputTokensOf(response({ completionTokens: 9 }), counter)).toEqual({ count: 9, source: 'usage' });
  });

  it('keep the error code of a failed call', () => {
    const record = failedCallRecord(placement, new HatError('MODEL_TIMEOUT', 'no answer in 5 ms'));
    expect(record).toMatchObject({
      status: 'failed',
      errorCode: 'MODEL_TIMEOUT',
      error: '[MODEL_TIMEOUT] no answer in 5 ms',
      scheduleLagMs: 2,
    });
    expect(record.ttftMs).toBeUndefined();
  });
});

describe('record layout', () => {
  it('keeps the key order the JSON lines have always had, optional fields in their places', () => {
    const record = succeededCallRecord({ ...placement, recordedTtftMs: 90 }, response({ completionTokens: 10 }));
    expect(Object.keys(record)).toEqual([
      'sessionId',
      'sessionIndex',
      'callIndex',
      'messageIndex',
      'part',
      'intendedMs',
      'dispatchMs',
      'endMs',
      'thinkMs',
      'recordedTtftMs',
      'status',
      'sentMs',
      'scheduleLagMs',
      'queueMs',
      'retryMs',
      'ttftMs',
      'e2elMs',
      'tpotMs',
      'ttftFromIntendedMs',
      'e2elFromIntendedMs',
      'clientOverheadMs',
      'outputTokens',
      'outputTokensSource',
      'promptTokens',
      'chunkCount',
      'finishReason',
      'attempts',
    ]);
    const failed = failedCallRecord(placement, new HatError('MODEL_TIMEOUT', 'timed out'));
    expect(Object.keys(failed).slice(9)).toEqual([
      'status',
      'errorCode',
      'error',
      'scheduleLagMs',
      'queueMs',
      'retryMs',
    ]);
  });
});
