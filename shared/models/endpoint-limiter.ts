import { unwatchAbort, watchAbort } from './abort-watch';
import { abortableDelay, abortedError } from './model-clock';

/** Limits of one model endpoint, shared by every client of that endpoint in the process. */
export interface EndpointLimits {
  /** Requests in flight at once. */
  concurrency: number;
  /** Requests started per minute (token bucket holding one second's worth). */
  requestsPerMinute?: number;
  /** Prompt + completion tokens per minute (estimated before sending, corrected from usage after). */
  tokensPerMinute?: number;
}

/** A held slot of an endpoint. */
export interface EndpointPermit {
  /** Time spent waiting for the slot and the rate limits, ms (reported as the call's queueMs). */
  readonly queueMs: number;
  /** Frees the slot; `actualTokens` (from usage) corrects the token bucket for the estimate. */
  release(actualTokens?: number): void;
}

/**
 * Refills continuously at the per-minute rate and holds one second's worth, so a limit of 600 per
 * minute allows bursts of 10 rather than 600 (providers enforce their minute limits in shorter
 * windows). A cost larger than the capacity may take a full bucket into debt, so oversized
 * requests still go through and later ones wait the debt off.
 */
class TokenBucket {
  private level: number;
  private updatedAt = performance.now();
  private readonly capacity: number;
  private readonly perMs: number;

  constructor(readonly perMinute: number) {
    this.capacity = Math.max(1, perMinute / 60);
    this.perMs = perMinute / 60_000;
    this.level = this.capacity;
  }

  /** Takes `cost` and returns 0, or returns the ms to wait before trying again. */
  tryTake(cost: number): number {
    this.refill();
    const needed = Math.min(cost, this.capacity);
    if (this.level >= needed) {
      this.level -= cost;
      return 0;
    }
    return Math.ceil((needed - this.level) / this.perMs);
  }

  /** Gives back (positive) or charges (negative) tokens after the fact. */
  adjust(amount: number): void {
    this.refill();
    this.level = Math.min(this.capacity, this.level + amount);
  }

  private refill(): void {
    const now = performance.now();
    this.level = Math.min(this.capacity, this.level + (now - this.updatedAt) * this.perMs);
    this.updatedAt = now;
  }
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Concurrency slots (FIFO), request and token rate buckets, and a pause that a 429 with
 * `Retry-After` sets for everyone: clients of one endpoint back off together instead of each
 * hammering it in turn.
 */
export class EndpointLimiter {
  private active = 0;
  private readonly waiters: Waiter[] = [];
  private rateTurn: Promise<void> = Promise.resolve();
  /** Callers inside takeRate (waiting for or taking their rate turn). */
  private rateQueued = 0;
  private pausedUntil = 0;
  private requestBucket?: TokenBucket;
  private tokenBucket?: TokenBucket;
  private limitsValue: EndpointLimits;

  constructor(limits: EndpointLimits) {
    this.limitsValue = { concurrency: limits.concurrency };
    this.tighten(limits);
  }

  get limits(): Readonly<EndpointLimits> {
    return this.limitsValue;
  }

  /** Requests holding a slot now. */
  get inFlight(): number {
    return this.active;
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Applies another client's limits for the same endpoint: the stricter value of each wins, since
   * every config is a claim about what the one server can take.
   */
  tighten(limits: EndpointLimits): void {
    this.limitsValue.concurrency = Math.min(this.limitsValue.concurrency, limits.concurrency);
    const requests = stricter(this.requestBucket?.perMinute, limits.requestsPerMinute);
    if (requests !== this.requestBucket?.perMinute && requests !== undefined)
      this.requestBucket = new TokenBucket(requests);
    const tokens = stricter(this.tokenBucket?.perMinute, limits.tokensPerMinute);
    if (tokens !== this.tokenBucket?.perMinute && tokens !== undefined) this.tokenBucket = new TokenBucket(tokens);
    this.limitsValue = {
      concurrency: this.limitsValue.concurrency,
      requestsPerMinute: requests,
      tokensPerMinute: tokens,
    };
    this.wakeWaiters();
  }

  /** Holds back every new request of this endpoint for `ms` (a server's Retry-After). */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, performance.now() + ms);
  }

  /**
   * Waits out a pause, then a slot, then the rate buckets. `afterOwnBackoff` skips the pause for a
   * retry that has just waited out the very Retry-After that set it.
   */
  async acquire(estimatedTokens: number, signal?: AbortSignal, afterOwnBackoff = false): Promise<EndpointPermit> {
    const startedAt = performance.now();
    for (
      let wait = this.pausedUntil - performance.now();
      wait > 0 && !afterOwnBackoff;
      wait = this.pausedUntil - performance.now()
    ) {
      await abortableDelay(wait, signal);
    }
    await this.takeSlot(signal);
    try {
      await this.takeRate(estimatedTokens, signal);
    } catch (error) {
      this.releaseSlot();
      throw error;
    }
    return this.permit(estimatedTokens, performance.now() - startedAt);
  }

  /**
   * A permit now when nothing stands in the way (no pause, a free slot nobody queues for, rate
   * buckets that allow it and nobody waiting on them); undefined otherwise, and the caller awaits
   * acquire(). The common case then sends without a promise hop: 64 calls started in one tick
   * each send in their own turn instead of all queueing behind each other's request setup.
   */
  tryAcquire(estimatedTokens: number, signal?: AbortSignal, afterOwnBackoff = false): EndpointPermit | undefined {
    if (signal?.aborted || (!afterOwnBackoff && this.pausedUntil > performance.now())) return undefined;
    if (this.active >= this.limitsValue.concurrency || this.waiters.length > 0 || this.rateQueued > 0) return undefined;
    if ((this.requestBucket || this.tokenBucket) && this.rateWait(estimatedTokens) > 0) return undefined;
    this.active++;
    return this.permit(estimatedTokens, 0);
  }

  private permit(estimatedTokens: number, queueMs: number): EndpointPermit {
    let released = false;
    return {
      queueMs,
      release: (actualTokens?: number) => {
        if (released) return;
        released = true;
        if (actualTokens !== undefined) this.tokenBucket?.adjust(estimatedTokens - actualTokens);
        this.releaseSlot();
      },
    };
  }

  private takeSlot(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortedError(signal));
    if (this.active < this.limitsValue.concurrency && this.waiters.length === 0) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(abortedError(signal));
      };
      const waiter: Waiter = {
        resolve: () => {
          if (signal) unwatchAbort(signal, onAbort);
          resolve();
        },
        reject,
      };
      this.waiters.push(waiter);
      // One listener per signal however many calls wait on it (a part's calls all share its signal).
      if (signal) watchAbort(signal, onAbort);
    });
  }

  private releaseSlot(): void {
    this.active--;
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    while (this.active < this.limitsValue.concurrency && this.waiters.length > 0) {
      this.active++;
      this.waiters.shift()?.resolve();
    }
  }

  /** Rate waits run one after another, so waiters are served in arrival order. */
  private takeRate(estimatedTokens: number, signal?: AbortSignal): Promise<void> {
    if (!this.requestBucket && !this.tokenBucket) return Promise.resolve();
    this.rateQueued++;
    const turn = this.rateTurn
      .then(async () => {
        if (signal?.aborted) throw abortedError(signal);
        for (let wait = this.rateWait(estimatedTokens); wait > 0; wait = this.rateWait(estimatedTokens)) {
          await abortableDelay(wait, signal);
        }
      })
      .finally(() => {
        this.rateQueued--;
      });
    this.rateTurn = turn.catch(() => undefined);
    return turn;
  }

  /** Takes from both buckets only when both allow it, else returns how long to wait. */
  private rateWait(estimatedTokens: number): number {
    const requestWait = this.requestBucket?.tryTake(1) ?? 0;
    if (requestWait > 0) return requestWait;
    const tokenWait = this.tokenBucket?.tryTake(estimatedTokens) ?? 0;
    if (tokenWait > 0) this.requestBucket?.adjust(1);
    return tokenWait;
  }
}

function stricter(current: number | undefined, next: number | undefined): number | undefined {
  if (current === undefined) return next;
  if (next === undefined) return current;
  return Math.min(current, next);
}

const limiters = new Map<string, EndpointLimiter>();

/**
 * The process-wide limiter of an endpoint (one per base URL + model), created on first use and
 * tightened by every later client's limits: all jobs of a worker share it.
 */
export function endpointLimiterFor(endpointKey: string, limits: EndpointLimits): EndpointLimiter {
  const existing = limiters.get(endpointKey);
  if (existing) {
    existing.tighten(limits);
    return existing;
  }
  const created = new EndpointLimiter(limits);
  limiters.set(endpointKey, created);
  return created;
}
