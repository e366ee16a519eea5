import { setMaxListeners } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../shared/log/logger';
import { abortableDelay } from '../../shared/models/model-clock';
import { SampleSet } from '../../shared/metrics/sample-set';
import { scrapePrometheus } from '../../shared/metrics/scrape-metrics';
import { readSpecDecodeCounters, type SpecDecodeCounters } from '../../shared/metrics/spec-decode';
import type { ChatRequest, ModelClient, PreparedChatRequest, SamplingSettings } from '../../shared/models/model-client';
import type { Rng } from '../../shared/random/rng';
import { failedCallRecord, succeededCallRecord, type CallPlacement, type TokenCounter } from './call-measurement';
import { arrivalOffsetsMs, type LoadProfile } from './load-profile';
import type { ReplaySession } from './recorded-session';
import { addCallSamples, addSessionSamples, addTurnSamples } from './replay-metrics';
import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';
import type { SessionDriver } from './session-driver';

/** One reading of the server's spec-decode counters. */
export interface CounterReading {
  atEpochMs: number;
  counters: SpecDecodeCounters;
  /** Speculative-decoding series the server exposes (vLLM `vllm:spec_decode_*` counters, SGLang `sglang:spec_*` gauges). */
  specDecodeNames?: string[];
}

/** A session of the replay order: which recorded session, at which position. */
export interface ScheduledSession {
  session: ReplaySession;
  /** Position in the replay order over all parts (ids and seeds derive from it). */
  sessionIndex: number;
}

export interface ReplayPartOptions {
  /** This part's sessions, in replay order. */
  sessions: ScheduledSession[];
  /** Sessions replayed (and discarded) before measuring: warms connections, caches and JIT. */
  warmup: ScheduledSession[];
  client: ModelClient;
  driverFor(scheduled: ScheduledSession): SessionDriver;
  /** This part's share of the load. */
  load: LoadProfile;
  /** Seeds the open-loop arrivals. */
  rng: Rng;
  part: { index: number; count: number };
  /** Sampling sent with every call (the model config's own defaults apply beneath). */
  sampling?: SamplingSettings;
  /** Extra request fields for every call (e.g. vLLM's `ignore_eos`). */
  extraBody?: Record<string, unknown>;
  tokenizer?: TokenCounter;
  /** Prometheus endpoint of the server (`<root>/metrics`); read before and after the measured phase. */
  metricsUrl?: string;
  signal?: AbortSignal;
  logger?: Logger;
  /** Sessions finished so far (measured phase). */
  onProgress?(done: number, total: number): void;
}

/** Everything one part measured: the input of the merge. */
export interface ReplayPartResult {
  part: { index: number; count: number };
  /** Epoch ms of the measured phase (from the first intended start to the last session end). */
  window: { startEpochMs: number; endEpochMs: number; durationMs: number };
  load: LoadProfile;
  warmup: { sessions: number; calls: number; failedCalls: number };
  calls: ReplayCallRecord[];
  turns: ReplayTurnRecord[];
  sessions: ReplaySessionRecord[];
  samples: SampleSet;
  specDecode: { before?: CounterReading; after?: CounterReading; error?: string };
  client: ClientHealth;
}

/**
 * How busy and how late the replay's own event loop was during the measured phase. Every
 * timestamp is taken when the loop gets to it, so a loop that runs late (too many sessions per
 * process, an oversubscribed machine) adds that lateness to the latencies it measures.
 */
export interface ClientHealth {
  eventLoopDelayP99Ms: number;
  /** P99.9 lateness: what bounds the timestamps behind a P99 figure. */
  eventLoopDelayP999Ms?: number;
  eventLoopDelayMaxMs: number;
  /** Share of the phase the loop was busy, 0-1. */
  eventLoopUtilization: number;
  /**
   * Lateness (P99, ms) of a bare event loop (a worker thread doing nothing but wake up) over the
   * same phase: what any loop on this machine suffered then. Absent when it could not run.
   */
  bareLoopDelayP99Ms?: number;
}

/** Period (ms) of the timer whose lateness samples the replay's own event loop. */
const monitorResolutionMs = 1;

/**
 * The lateness a bare loop suffers, measured in a worker thread (its own event loop, same process
 * and machine) while the replay runs: the machine's share of the replay's own lateness.
 */
function startBareLoop(): { stop(): Promise<number | undefined> } {
  let worker: Worker | undefined;
  try {
    worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { monitorEventLoopDelay } = require('node:perf_hooks');
       const delay = monitorEventLoopDelay({ resolution: 5 });
       delay.enable();
       const keepAlive = setInterval(() => {}, 1000);
       parentPort.once('message', () => {
         delay.disable();
         clearInterval(keepAlive);
         parentPort.postMessage(delay.percentile(99));
       });`,
      { eval: true },
    );
    worker.unref();
  } catch {
    return { stop: async () => undefined };
  }
  const running = worker;
  return {
    stop: () =>
      new Promise((resolve) => {
        const done = (value: number | undefined) => {
          void running.terminate();
          resolve(value);
        };
        running.once('message', (nanoseconds: number) => done(Math.max(0, nanoseconds / 1e6 - 5)));
        running.once('error', () => done(undefined));
        running.postMessage('stop');
      }),
  };
}

/** Milliseconds since an origin on the monotonic clock. */
interface PhaseClock {
  now(): number;
  /** Resolves at `atMs` (at once when it has passed). */
  until(atMs: number, signal?: AbortSignal): Promise<void>;
}

interface TurnWaiter {
  atMs: number;
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal?: AbortSignal;
}

/**
 * Waiters whose timer fired a little before their time. They share one setImmediate per loop
 * turn: a promise per waiter per turn made a fifth of the replay's garbage, and collector pauses
 * are what late calls wait on.
 */
class LoopTurnWaiters {
  private readonly waiting: TurnWaiter[] = [];
  private scheduled = false;

  constructor(private readonly now: () => number) {}

  wait(atMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ atMs, resolve, reject, signal });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.turn);
      }
    });
  }

  private readonly turn = (): void => {
    const time = this.now();
    let kept = 0;
    for (const waiter of this.waiting) {
      if (waiter.signal?.aborted) waiter.reject(waiter.signal.reason);
      else if (time >= waiter.atMs) waiter.resolve();
      else this.waiting[kept++] = waiter;
    }
    this.waiting.length = kept;
    this.scheduled = kept > 0;
    if (this.scheduled) setImmediate(this.turn);
  };
}

const signalReason = (signal?: AbortSignal): unknown => signal?.reason;

function phaseClock(): PhaseClock {
  const origin = performance.now();
  const now = () => performance.now() - origin;
  const turnWaiters = new LoopTurnWaiters(now);
  return {
    now,
    async until(atMs, signal) {
      // A timer counts from the loop's cached whole-millisecond clock: measured, it fired 0-1.9 ms
      // early. A second timer for the rest made calls go 0.6-0.8 ms late at the median (schedule
      // lag that every measured call carries); waiting the rest out in loop turns sends them on
      // time, for about 1 ms of polling per wait (+0.1-0.2 ms CPU per call at 64 sessions).
      const wait = atMs - now();
      // The part's signal cuts the wait short with its own reason.
      if (wait > 0) await abortableDelay(wait, signal, signalReason);
      if (now() < atMs) await turnWaiters.wait(atMs, signal);
    },
  };
}

/**
 * Replays one part's sessions against the target under its share of the load and measures
 * every call and session. Warmup sessions run first (closed loop, no think time) and are
 * discarded; the server's spec-decode counters are read right before and after the measured
 * phase. Failed calls end their session (an agent cannot go on without the answer) and are
 * counted, never fatal.
 */
export async function runReplayPart(partOptions: ReplayPartOptions): Promise<ReplayPartResult> {
  // Every call in flight listens on the signal: a signal of our own, linked to the caller's, may have that many listeners.
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const stop = () => controller.abort(partOptions.signal?.reason);
  if (partOptions.signal?.aborted) stop();
  partOptions.signal?.addEventListener('abort', stop, { once: true });
  try {
    return await replayMeasured({ ...partOptions, signal: controller.signal });
  } finally {
    partOptions.signal?.removeEventListener('abort', stop);
  }
}

/** Key of a prepared body: the recorded session (repeats share it) and the message it replays. */
function preparedKey(sessionId: string, messageIndex: number): string {
  return `${sessionId.replace(/#\d+$/, '')}\u0000${messageIndex}`;
}

/**
 * Serializes every request the measured sessions will send that is known up front (forced
 * history), so that building bodies does not occupy the event loop while streams arrive.
 */
function prepareBodies(options: ReplayPartOptions): Map<string, PreparedChatRequest> {
  const prepared = new Map<string, PreparedChatRequest>();
  const prepare = options.client.prepare?.bind(options.client);
  if (!prepare) return prepared;
  for (const scheduled of options.sessions) {
    const planned = options.driverFor(scheduled).plannedRequests?.();
    if (!planned) return prepared;
    for (const { messageIndex, ...request } of planned) {
      const key = preparedKey(scheduled.session.id, messageIndex);
      if (prepared.has(key)) continue;
      const merged: ChatRequest = Object.assign(
        {},
        options.sampling,
        request,
        options.extraBody ? { extraBody: options.extraBody } : {},
      );
      prepared.set(key, prepare(merged));
    }
  }
  return prepared;
}

async function replayMeasured(options: ReplayPartOptions): Promise<ReplayPartResult> {
  const { laneOffsetsMs, ...warmupResult } = await runWarmup(options);
  const prepared = prepareBodies(options);
  const before = await readCounters(options);
  // A 1 ms timer: a finer sample of the lateness any socket read waits for (a 5 ms timer's own
  // granularity read 0.8 ms of lateness on an idle loop here, a 1 ms timer's 0.2 ms).
  const loopDelay = monitorEventLoopDelay({ resolution: monitorResolutionMs });
  loopDelay.enable();
  const bareLoop = startBareLoop();
  const busyBefore = performance.eventLoopUtilization();
  const clock = phaseClock();
  const startEpochMs = Date.now();
  const calls: ReplayCallRecord[] = [];
  const turns: ReplayTurnRecord[] = [];
  const sessions: ReplaySessionRecord[] = [];
  const samples = new SampleSet();
  const total = options.sessions.length;
  // Results in the order sessions finished; records and samples are made from them after the
  // measured phase, so that this work does not occupy the event loop while other calls run.
  const finished: SessionResult[] = [];
  const record = (result: SessionResult) => {
    finished.push(result);
    options.onProgress?.(finished.length, total);
  };
  const run = (scheduled: ScheduledSession, intendedStartMs: number) =>
    replaySession(scheduled, intendedStartMs, clock, options, true, prepared);

  if (options.load.kind === 'closed') {
    // Each lane starts at the offset its warmup lane ended at: the warmup absorbed the start burst
    // (every session sending in one tick) and the measured phase keeps the spread it left.
    await runClosedLoop(
      options.sessions,
      options.load.concurrency,
      async (scheduled) => record(await run(scheduled, clock.now())),
      options.signal,
      { clock, laneStartsMs: laneOffsetsMs },
    );
  } else {
    const offsets = arrivalOffsetsMs(
      options.sessions.length,
      options.load.rate,
      options.load.burstiness,
      options.rng.fork('arrivals'),
    );
    const gate = options.load.maxConcurrency === undefined ? undefined : new SessionGate(options.load.maxConcurrency);
    const running: Promise<void>[] = [];
    for (const [position, scheduled] of options.sessions.entries()) {
      const intended = offsets[position];
      await clock.until(intended, options.signal);
      if (gate) await gate.acquire();
      running.push(
        run(scheduled, intended)
          .then(record)
          .finally(() => gate?.release()),
      );
    }
    await Promise.all(running);
  }
  const durationMs = clock.now();
  loopDelay.disable();
  for (const result of finished) {
    calls.push(...result.calls);
    sessions.push(result.session);
    for (const call of result.calls) addCallSamples(samples, call, result.itl.get(call.callIndex) ?? []);
    for (const turn of result.turns) {
      turns.push(turn);
      addTurnSamples(samples, turn);
    }
    addSessionSamples(samples, result.session);
  }
  // The monitor's own timer period is part of every sample it takes; what is above it is lateness.
  const lateness = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - monitorResolutionMs);
  const bareLoopDelayP99Ms = await bareLoop.stop();
  const client: ClientHealth = {
    eventLoopDelayP99Ms: lateness(loopDelay.percentile(99)),
    eventLoopDelayP999Ms: lateness(loopDelay.percentile(99.9)),
    eventLoopDelayMaxMs: lateness(loopDelay.max),
    eventLoopUtilization: performance.eventLoopUtilization(busyBefore).utilization,
    ...(bareLoopDelayP99Ms !== undefined ? { bareLoopDelayP99Ms } : {}),
  };
  const after = await readCounters(options);
  const specDecode: ReplayPartResult['specDecode'] = {};
  if ('reading' in before) specDecode.before = before.reading;
  if ('reading' in after) specDecode.after = after.reading;
  const scrapeError = 'error' in before ? before.error : 'error' in after ? after.error : undefined;
  if (scrapeError !== undefined) specDecode.error = scrapeError;
  return {
    part: options.part,
    window: { startEpochMs, endEpochMs: startEpochMs + durationMs, durationMs },
    load: options.load,
    warmup: warmupResult,
    calls,
    turns,
    sessions,
    samples,
    specDecode,
    client,
  };
}

/**
 * Warmup sessions, closed loop, discarded. Also returns when each lane ended, as offsets from the
 * first (ascending): the closed loop's measured lanes start at them.
 */
async function runWarmup(
  options: ReplayPartOptions,
): Promise<ReplayPartResult['warmup'] & { laneOffsetsMs: number[] }> {
  const warmup = { sessions: options.warmup.length, calls: 0, failedCalls: 0 };
  if (options.warmup.length === 0) return { ...warmup, laneOffsetsMs: [] };
  const concurrency =
    options.load.kind === 'closed' ? options.load.concurrency : (options.load.maxConcurrency ?? options.warmup.length);
  const clock = phaseClock();
  const laneEnds = await runClosedLoop(
    options.warmup,
    Math.min(concurrency, options.warmup.length),
    async (scheduled) => {
      const result = await replaySession(scheduled, clock.now(), clock, options, false);
      warmup.calls += result.calls.length;
      warmup.failedCalls += result.calls.filter((call) => call.status === 'failed').length;
    },
    options.signal,
    { clock },
  );
  options.logger?.debug({ part: options.part.index, ...warmup }, 'replay warmup done');
  const first = Math.min(...laneEnds);
  return { ...warmup, laneOffsetsMs: laneEnds.map((end) => end - first).sort((left, right) => left - right) };
}

/**
 * `concurrency` lanes, each taking the next session when its previous one ends; lane i starts at
 * `laneStartsMs[i]` of `clock` (at once when absent). Resolves to each lane's end time on `clock`.
 */
async function runClosedLoop(
  sessions: ScheduledSession[],
  concurrency: number,
  runOne: (scheduled: ScheduledSession) => Promise<void>,
  signal?: AbortSignal,
  timing: { clock?: PhaseClock; laneStartsMs?: readonly number[] } = {},
): Promise<number[]> {
  let next = 0;
  const lane = async (_: unknown, index: number): Promise<number> => {
    const startMs = timing.laneStartsMs?.[index];
    if (timing.clock && startMs !== undefined && startMs > 0) await timing.clock.until(startMs, signal);
    while (next < sessions.length && !signal?.aborted) await runOne(sessions[next++]);
    return timing.clock?.now() ?? 0;
  };
  return Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, sessions.length)) }, lane));
}

/** Caps sessions in flight in open-loop mode; waiters are served in arrival order. */
class SessionGate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const waiter = this.waiting.shift();
    if (waiter) waiter();
    else this.active--;
  }
}

interface SessionResult {
  calls: ReplayCallRecord[];
  turns: ReplayTurnRecord[];
  session: ReplaySessionRecord;
  /** ITL gaps by call index (kept out of the records: pooled straight into samples). */
  itl: Map<number, number[]>;
}

/**
 * One session: each call goes at its intended time (the session's start for the first, the
 * previous call's end plus its think time after that); measured calls carry both the vLLM
 * clock (from the actual send) and the intended-time clock.
 */
async function replaySession(
  scheduled: ScheduledSession,
  intendedStartMs: number,
  clock: PhaseClock,
  options: ReplayPartOptions,
  withThinkTime: boolean,
  prepared?: ReadonlyMap<string, PreparedChatRequest>,
): Promise<SessionResult> {
  const { session, sessionIndex } = scheduled;
  const driver = options.driverFor(scheduled);
  const calls: ReplayCallRecord[] = [];
  const turns: ReplayTurnRecord[] = [];
  const itl = new Map<number, number[]>();
  let intendedMs = intendedStartMs;
  // The viewer turn in progress: opened by the first call after the previous turn's final answer.
  let turn: ReplayTurnRecord | undefined;
  let startMs: number | undefined;
  let failure: string | undefined;
  let modelMs = 0;
  let toolMs = 0;
  let lastFirstTokenMs: number | undefined;
  let endMs = intendedStartMs;
  for (let step = driver.next(), callIndex = 0; step !== undefined; step = driver.next(), callIndex++) {
    await clock.until(intendedMs, options.signal);
    const dispatchMs = clock.now();
    startMs ??= dispatchMs;
    // Object.assign onto a fresh object, not `{ ...options.sampling, ...step.request }`: on Node 20
    // every property added after a leading non-empty spread costs about 2 µs.
    const preparedBody = prepared?.get(preparedKey(session.id, step.messageIndex));
    const request: ChatRequest = Object.assign(
      {},
      options.sampling,
      step.request,
      options.extraBody ? { extraBody: options.extraBody } : {},
      options.signal ? { signal: options.signal } : {},
      preparedBody ? { prepared: preparedBody } : {},
    );
    // One literal, then named stores: it lives for the whole call (a young-generation collection
    // copies whatever is alive), so it is built once and completed in place rather than spread.
    const placement: CallPlacement = {
      sessionId: session.id,
      sessionIndex,
      callIndex,
      messageIndex: step.messageIndex,
      part: options.part.index,
      intendedMs,
      dispatchMs,
      endMs: dispatchMs,
      thinkMs: 0,
    };
    const recorded = step.recorded;
    if (recorded?.recordedTtftMs !== undefined) placement.recordedTtftMs = recorded.recordedTtftMs;
    if (recorded?.recordedE2eMs !== undefined) placement.recordedE2eMs = recorded.recordedE2eMs;
    if (recorded?.recordedOutputTokens !== undefined) placement.recordedOutputTokens = recorded.recordedOutputTokens;
    turn ??= {
      sessionId: session.id,
      sessionIndex,
      turnIndex: step.turnIndex,
      part: options.part.index,
      status: 'failed',
      calls: 0,
      intendedStartMs: intendedMs,
      startMs: dispatchMs,
      toolMs: 0,
      modelMs: 0,
    };
    turn.calls++;
    let response;
    try {
      response = await options.client.chat(request);
    } catch (error) {
      endMs = clock.now();
      placement.endMs = endMs;
      const failed = failedCallRecord(placement, error);
      calls.push(failed);
      failure = `call ${callIndex} failed: ${failed.error ?? failed.errorCode}`;
      break;
    }
    endMs = clock.now();
    const outcome = await driver.accept(step, response);
    const thinkMs = withThinkTime ? outcome.thinkMs : 0;
    placement.endMs = endMs;
    placement.thinkMs = thinkMs;
    if (outcome.divergence) placement.divergence = outcome.divergence;
    const call = succeededCallRecord(placement, response, options.tokenizer);
    calls.push(call);
    itl.set(callIndex, response.timings.itlMs ?? []);
    modelMs += response.timings.e2eMs;
    lastFirstTokenMs = (call.sentMs as number) + response.timings.ttftMs;
    intendedMs = endMs + thinkMs;
    toolMs += thinkMs;
    turn.modelMs = (turn.modelMs as number) + response.timings.e2eMs;
    if (outcome.endsTurn) {
      // Speech can start at the answer's first text; an answer without text counts from its first chunk.
      const firstTokenAtMs = (call.sentMs as number) + (response.timings.firstContentMs ?? response.timings.ttftMs);
      const answerEndMs = (call.sentMs as number) + response.timings.e2eMs;
      turns.push(
        Object.assign(turn, {
          status: 'ok' as const,
          firstTokenAtMs,
          endMs: answerEndMs,
          firstTokenMs: firstTokenAtMs - turn.startMs,
          firstTokenFromIntendedMs: firstTokenAtMs - turn.intendedStartMs,
          responseMs: answerEndMs - turn.startMs,
          responseFromIntendedMs: answerEndMs - turn.intendedStartMs,
        }),
      );
      turn = undefined;
    } else {
      turn.toolMs = (turn.toolMs as number) + thinkMs;
    }
  }
  // A turn cut off by a failed call or by the session's end never reached the viewer.
  if (turn) turns.push(turn);
  const lastThink = calls.at(-1)?.thinkMs ?? 0;
  // The think time after the last call is never waited: the session is over.
  if (failure === undefined) toolMs -= lastThink;
  const first = startMs ?? intendedStartMs;
  const record: ReplaySessionRecord = {
    sessionId: session.id,
    sessionIndex,
    part: options.part.index,
    status: failure === undefined && calls.length > 0 ? 'ok' : 'failed',
    ...(failure !== undefined ? { error: failure } : {}),
    calls: calls.length,
    intendedStartMs,
    startMs: first,
    endMs,
    ...(failure === undefined && lastFirstTokenMs !== undefined
      ? {
          e2eMs: endMs - first,
          e2eFromIntendedMs: endMs - intendedStartMs,
          finalAnswerTtftMs: lastFirstTokenMs - first,
          finalAnswerTtftFromIntendedMs: lastFirstTokenMs - intendedStartMs,
          modelMs,
          toolMs,
          overheadMs: endMs - first - modelMs - toolMs,
        }
      : {}),
    ...(driver.liveSummary ? { live: driver.liveSummary() } : {}),
  };
  return { calls, turns, session: record, itl };
}

async function readCounters(
  options: ReplayPartOptions,
): Promise<{ reading: CounterReading } | { error: string } | { skipped: true }> {
  if (!options.metricsUrl) return { skipped: true };
  try {
    const samples = await scrapePrometheus(options.metricsUrl);
    const specDecodeNames = [
      ...new Set(samples.map((sample) => sample.name).filter((name) => /^(vllm:spec_decode|sglang:spec_)/.test(name))),
    ].sort();
    return { reading: { atEpochMs: Date.now(), counters: readSpecDecodeCounters(samples), specDecodeNames } };
  } catch (error) {
    options.logger?.warn(
      { url: options.metricsUrl, error: (error as Error).message },
      'could not read the server metrics; spec-decode figures will be missing',
    );
    return { error: (error as Error).message };
  }
}
