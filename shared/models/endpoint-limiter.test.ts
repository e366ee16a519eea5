import { getEventListeners } from 'node:events';
import { EndpointLimiter, endpointLimiterFor } from './endpoint-limiter';

describe('EndpointLimiter', () => {
  test("calls waiting for a slot on one part's signal add one abort listener between them, and an abort ends every wait", async () => {
    const limiter = new EndpointLimiter({ concurrency: 1 });
    const controller = new AbortController();
    const held = await limiter.acquire(0, controller.signal);
    const waits = Array.from({ length: 16 }, () => limiter.acquire(0, controller.signal));
    // Sixteen listeners on one signal was Node's MaxListenersExceededWarning in every demo run.
    expect(getEventListeners(controller.signal, 'abort').length).toBe(1);
    expect(limiter.waiting).toBe(16);
    controller.abort();
    const settled = await Promise.allSettled(waits);
    expect(settled.map((result) => result.status)).toEqual(Array(16).fill('rejected'));
    expect(limiter.waiting).toBe(0);
    held.release();
  });

  test('grants slots first come, first served and never more than the limit', async () => {
    const limiter = new EndpointLimiter({ concurrency: 2 });
    const order: number[] = [];
    let active = 0;
    let highest = 0;
    await Promise.all(
      [0, 1, 2, 3, 4, 5].map(async (index) => {
        const permit = await limiter.acquire(0);
        order.push(index);
        active++;
        highest = Math.max(highest, active);
        await new Promise((resolve) => setTimeout(resolve, 5));
        active--;
        permit.release();
      }),
    );
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    expect(highest).toBe(2);
    expect(limiter.inFlight).toBe(0);
  });

  test('tryAcquire grants a free slot at once, and nothing while the endpoint is full, paused, queued for or rate-limited', async () => {
    const limiter = new EndpointLimiter({ concurrency: 2, requestsPerMinute: 120 });
    const first = limiter.tryAcquire(10);
    expect([first?.queueMs, limiter.inFlight]).toEqual([0, 1]);
    const second = limiter.tryAcquire(10);
    expect(limiter.tryAcquire(10)).toBeUndefined();
    // A caller already queued keeps its turn: a later tryAcquire does not jump it.
    const queued = limiter.acquire(10);
    first?.release();
    expect(limiter.tryAcquire(10)).toBeUndefined();
    (await queued).release();
    second?.release();
    // Two requests per second of burst: both were taken, so the bucket refuses a third now.
    expect(limiter.tryAcquire(10)).toBeUndefined();
    expect(limiter.inFlight).toBe(0);

    const open = new EndpointLimiter({ concurrency: 4 });
    open.pause(60_000);
    expect(open.tryAcquire(0)).toBeUndefined();
    // A retry that has just waited out the Retry-After itself is not held back by it.
    const retry = open.tryAcquire(0, undefined, true);
    expect(retry).toBeDefined();
    retry?.release();
    const controller = new AbortController();
    controller.abort();
    expect(open.tryAcquire(0, controller.signal)).toBeUndefined();
    expect(open.inFlight).toBe(0);
  });

  test('an aborted waiter leaves the queue without taking a slot', async () => {
    const limiter = new EndpointLimiter({ concurrency: 1 });
    const held = await limiter.acquire(0);
    const controller = new AbortController();
    const waiting = limiter.acquire(0, controller.signal);
    expect(limiter.waiting).toBe(1);
    controller.abort();
    await expect(waiting).rejects.toThrow(/MODEL_ABORTED/);
    expect(limiter.waiting).toBe(0);
    held.release();
    const next = await limiter.acquire(0);
    expect(limiter.inFlight).toBe(1);
    next.release();
  });

  test('requests per minute allow one second of burst, then pace the rest', async () => {
    const limiter = new EndpointLimiter({ concurrency: 100, requestsPerMinute: 1200 });
    const started = performance.now();
    const permits = await Promise.all(Array.from({ length: 30 }, () => limiter.acquire(0)));
    // 20 go at once (one second's worth), the other 10 need 10 / (20 per second) = 500 ms.
    expect(performance.now() - started).toBeGreaterThanOrEqual(450);
    const waits = permits.map((permit) => permit.queueMs);
    waits.slice(20).forEach((wait, index) => expect(wait).toBeGreaterThanOrEqual(45 * (index + 1)));
    permits.forEach((permit) => permit.release());
  });

  test('tokens per minute charge the estimate and correct it from usage', async () => {
    const limiter = new EndpointLimiter({ concurrency: 10, tokensPerMinute: 60_000 });
    // capacity is 1000 tokens; an over-sized request drains a full bucket into debt
    const first = await limiter.acquire(1500);
    first.release(1500);
    const started = performance.now();
    const second = await limiter.acquire(100);
    // debt 500 + 100 needed at 1 token/ms
    expect(performance.now() - started).toBeGreaterThanOrEqual(550);
    second.release(0);
  });

  test('a pause holds back new requests; the stricter of two configs wins', async () => {
    const shared = endpointLimiterFor('http://limiter.test gpt', { concurrency: 8 });
    expect(endpointLimiterFor('http://limiter.test gpt', { concurrency: 3, requestsPerMinute: 60 })).toBe(shared);
    expect(shared.limits).toEqual({ concurrency: 3, requestsPerMinute: 60, tokensPerMinute: undefined });
    const limiter = new EndpointLimiter({ concurrency: 1 });
    limiter.pause(200);
    const permit = await limiter.acquire(0);
    expect(permit.queueMs).toBeGreaterThanOrEqual(190);
    permit.release();
  });
});
