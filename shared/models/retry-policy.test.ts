import { BadInputError, TransientError } from '../errors';
import { RetryPolicy, parseRetryAfter } from './retry-policy';

const settings = { maxRetries: 3, initialDelayMs: 100, maxDelayMs: 250, maxRetryAfterMs: 10_000 };

describe('RetryPolicy', () => {
  test('backs off exponentially up to the cap, minus up to a quarter of jitter', () => {
    const transient = new TransientError('MODEL_SERVER_ERROR', 'x');
    const delays = (random: number): unknown[] =>
      [1, 2, 3].map((attempt) => new RetryPolicy(settings, () => random).decide(transient, attempt));
    expect(delays(0)).toEqual([100, 200, 250].map((delayMs) => ({ action: 'retry', delayMs })));
    expect(delays(0.999999)).toEqual([75, 150, 188].map((delayMs) => ({ action: 'retry', delayMs })));
  });

  test('stops after maxRetries, never retries permanent errors, honours hints up to the limit', () => {
    const policy = new RetryPolicy(settings, () => 0);
    expect(policy.decide(new TransientError('MODEL_TIMEOUT', 'x'), 4)).toEqual({ action: 'give-up' });
    expect(policy.decide(new BadInputError('MODEL_BAD_REQUEST', 'x'), 1)).toEqual({ action: 'fail' });
    expect(policy.decide(new Error('plain'), 1)).toEqual({ action: 'fail' });
    expect(policy.decide(Object.assign(new Error('reset'), { code: 'ECONNRESET' }), 1)).toEqual({
      action: 'retry',
      delayMs: 100,
    });
    expect(policy.decide(new TransientError('MODEL_RATE_LIMITED', 'x', { retryAfterMs: 4000 }), 1)).toEqual({
      action: 'retry',
      delayMs: 4000,
    });
    expect(policy.decide(new TransientError('MODEL_RATE_LIMITED', 'x', { retryAfterMs: 20_000 }), 1)).toEqual({
      action: 'give-up',
    });
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  test('reads retry-after-ms, seconds and HTTP dates', () => {
    expect(parseRetryAfter({ 'retry-after-ms': '1500', 'retry-after': '9' }, now)).toBe(1500);
    expect(parseRetryAfter({ 'retry-after': '2' }, now)).toBe(2000);
    expect(parseRetryAfter({ 'retry-after': '0.5' }, now)).toBe(500);
    expect(parseRetryAfter({ 'retry-after': 'Wed, 01 Jan 2025 00:00:07 GMT' }, now)).toBe(7000);
    expect(parseRetryAfter({ 'retry-after': 'Tue, 31 Dec 2024 23:00:00 GMT' }, now)).toBe(0);
  });

  test('ignores missing and unreadable hints', () => {
    expect(parseRetryAfter({}, now)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(parseRetryAfter({ 'retry-after-ms': '-5' }, now)).toBeUndefined();
  });
});
