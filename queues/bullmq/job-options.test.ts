import { TransientError } from '../../shared/errors';
import { backoffDelay, backoffType, checkJobData, hatBackoffStrategy, maxBackoffMs } from './job-options';

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

describe('checkJobData', () => {
  it('refuses job data holding a URL with credentials anywhere, naming the field, never the key', () => {
    const data = {
      runId: 'r1',
      artifactsRoot: 's3://hat/runs',
      config: { models: [{ model: { baseUrl: 'http://h:8000/v1?api_key=sk-live-1' } }] },
    };
    let message = '';
    try {
      checkJobData(data, 10_000, { stage: 'eval', jobId: 'r1.eval' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(
      /^\[URI_CREDENTIALS\] job data for stage "eval" \(job r1\.eval\): config\.models\.0\.model\.baseUrl holds credentials in the URL \(the query parameter "api_key"\)/,
    );
    expect(message).toContain('keys belong in the environment');
    expect(message).not.toContain('sk-live-1');
    expect(() =>
      checkJobData({ artifactsRoot: 's3://AKIA:wJal/rXUt@hat/runs' }, 10_000, { label: 'the run job' }),
    ).toThrow(/^\[URI_CREDENTIALS\] job data for the run job: artifactsRoot holds credentials/);
  });

  it('passes data within the limit and names stage, job and size otherwise', () => {
    expect(() => checkJobData({ uri: 's3://b/k' }, 100, { stage: 'collect' })).not.toThrow();
    expect(() => checkJobData({ payload: 'x'.repeat(200) }, 100, { stage: 'collect', jobId: 'r.collect.1' })).toThrow(
      /^\[JOB_DATA_TOO_LARGE\] job data for stage "collect" \(job r\.collect\.1\) is 214 bytes, over the limit of 100 bytes/,
    );
  });
});
