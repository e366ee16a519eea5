import { TransientError } from '../../shared/errors';
import { backoffDelay, backoffType, checkJobDataSize, hatBackoffStrategy, maxBackoffMs } from './job-options';

describe('backoff', () => {
  it('doubles per attempt with jitter between half and the full delay, capped', () => {
    for (let attempt = 1; attempt <= 6; attempt++) {
      const full = 1_000 * 2 ** (attempt - 1);
      for (let sample = 0; sample < 50; sample++) {
        const delay = backoffDelay(attempt, 1_000);
        expect(delay).toBeGreaterThanOrEqual(full / 2);
        expect(delay).toBeLessThanOrEqual(full);
      }
    }
    expect(backoffDelay(40, 1_000)).toBeLessThanOrEqual(maxBackoffMs);
  });

  it("treats a server's Retry-After hint as a floor", () => {
    const error = new TransientError('RATE_LIMITED', '429', { retryAfterMs: 30_000 });
    expect(backoffDelay(1, 100, error)).toBe(30_000);
  });

  it('reads the base delay from the job options', () => {
    const delay = hatBackoffStrategy(1, backoffType, undefined, {
      opts: { backoff: { type: backoffType, delay: 40 } },
    } as never) as number;
    expect(delay).toBeGreaterThanOrEqual(20);
    expect(delay).toBeLessThanOrEqual(40);
  });
});

describe('checkJobDataSize', () => {
  it('passes data within the limit and names stage, job and size otherwise', () => {
    expect(() => checkJobDataSize({ uri: 's3://b/k' }, 100, { stage: 'collect' })).not.toThrow();
    expect(() =>
      checkJobDataSize({ payload: 'x'.repeat(200) }, 100, { stage: 'collect', jobId: 'r.collect.1' }),
    ).toThrow(
      /^\[JOB_DATA_TOO_LARGE\] job data for stage "collect" \(job r\.collect\.1\) is 214 bytes, over the limit of 100 bytes/,
    );
  });
});
