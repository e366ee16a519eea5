/**
 * The replay client's own overhead per model call, and the highest session concurrency it
 * sustains before that overhead breaks the goal (p99 < 1 ms). The sessions are replayed in
 * closed loop against the local test server running in a child process (its own event loop),
 * which streams answers with a TTFT of 50-100 ms and 5-10 ms per token.
 *
 * Per call, "own overhead" is what the replay adds to the server's time: schedule lag (how late
 * the call left against its intended time) plus the client's time outside the gate wait and the
 * send-to-last-chunk window (request building, final assembly, promise hops). Also printed: the
 * event-loop busy time and process CPU time per call (warmup included), and the measured TTFT
 * (injected: uniform 50-100 ms).
 * Levels run from the lowest up; the last line gives the highest concurrency before the first
 * level that misses the goal (or fails a call), and the sweep stops there once it has measured
 * the goal's own level (`--goal-sessions`, 64). A discarded run first warms the JIT, so the
 * first level is not the one that pays for compiling; each level then warms its own connections.
 * The restated goal, a ratio measured in one run: at the goal's level the same sessions (same
 * requests, same intended send times and think times) are also driven by a bare node:http loop
 * (`bareHttpCall`: it only reads the bytes) with the same intended-time waits, the same warmup and
 * the same lane starts; `--rounds` (4) rounds of each, interleaved (bare-replay, replay-bare, ...),
 * own times pooled. The replay's own time p99 may exceed the bare loop's by at most
 * `--goal-delta-ms` (0.25 ms). Own time on both sides: schedule lag plus the time outside the
 * window from sending to the last response chunk read (the replay's window ends at the last
 * choices-bearing chunk, which arrives in the same read as the usage chunk and [DONE] when the
 * server writes them together, as vLLM and this test server do).
 * `--pin` (Linux, taskset) runs this process on CPU 0 and the test server on CPU 1, so that the
 * scheduler never puts both on one core (a call that waits behind the server for a core lands
 * in the p99 of whichever side was running). Both sides of the restated goal run pinned alike.
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/replay.bench.js [--levels 16,32,64,128] [--goal-ms 1] [--goal-sessions 64] [--rounds 4] [--pin]
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { availableParallelism, loadavg } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { percentilesOf } from '../shared/metrics/percentile';
import { createModelClient } from '../shared/models/model-registry';
import { Rng } from '../shared/random/rng';
import { parseRecordedSession, type ReplaySession } from '../workers/replay/recorded-session';
import { runReplayPart, type ScheduledSession } from '../workers/replay/replay-engine';
import { forcedHistoryDriver } from '../workers/replay/session-driver';
import { startReplayServerProcess } from '../workers/replay/testing/replay-test-server-process';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';
import { bareHttpCall, type Call } from './openai-client.bench';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { checkBenchFlags } from './bench-flags';

registerModelAdapters();

/** Own times (sorted) and process CPU ms per call (warmup included) of one driven phase. */
interface DrivenCalls {
  ownTimes: number[];
  lagTimes: number[];
  cpuMsPerCall: number;
  /** Own time p99 of each round, in run order (pooled figures only). */
  roundP99s?: number[];
}

/**
 * The baseline of the restated goal: the same closed-loop sessions driven by bare node:http calls,
 * set up as the replay sets up its own phase: the first `concurrency` sessions run first as a
 * discarded warmup (connections, JIT), and each measured lane starts at the offset its warmup
 * lane ended at (the replay's way of absorbing the start burst). Each call waits for its intended
 * time (previous end + recorded think time) the way the replay does (a timer, then loop turns);
 * own time = how late it left + everything outside the send-to-last-chunk window.
 */
async function bareReplay(url: string, sessions: ScheduledSession[], concurrency: number): Promise<DrivenCalls> {
  // An agent per phase: idle keep-alive sockets kept across phases may be closed by the server mid-reuse.
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const calls = new Map<string, Call>();
  const callFor = (session: ReplaySession, messageIndex: number): Call => {
    const key = `${session.id}/${messageIndex}`;
    let call = calls.get(key);
    if (!call) {
      call = bareHttpCall(
        url,
        { messages: session.messages.slice(0, messageIndex), tools: session.tools },
        'test-model',
        agent,
      );
      calls.set(key, call);
    }
    return call;
  };
  // Bodies built before the measured loop, as the replay's are (prepareBodies).
  for (const { session } of sessions) for (const plan of session.calls) callFor(session, plan.messageIndex);
  const drive = async (
    phase: ScheduledSession[],
    laneStartsMs: readonly number[],
    ownTimes: number[],
    lagTimes: number[],
  ): Promise<number[]> => {
    let next = 0;
    const origin = performance.now();
    const now = () => performance.now() - origin;
    const waitUntil = async (atMs: number) => {
      const wait = atMs - now();
      if (wait > 0) await sleep(wait);
      while (now() < atMs) await new Promise((resolve) => setImmediate(resolve));
    };
    return Promise.all(
      Array.from({ length: Math.min(concurrency, phase.length) }, async (_, lane) => {
        const startMs = laneStartsMs[lane] ?? 0;
        if (startMs > 0) await waitUntil(startMs);
        while (next < phase.length) {
          const { session } = phase[next++];
          let intended = now();
          for (const plan of session.calls) {
            await waitUntil(intended);
            const dispatched = now();
            const window = await callFor(session, plan.messageIndex)();
            const ended = now();
            ownTimes.push(dispatched - intended + (ended - dispatched - window));
            lagTimes.push(dispatched - intended);
            intended = ended + plan.thinkMsAfter;
          }
        }
        return now();
      }),
    );
  };
  const cpuBefore = process.cpuUsage();
  const warmupOwn: number[] = [];
  const laneEnds = await drive(sessions.slice(0, concurrency), [], warmupOwn, []);
  const first = Math.min(...laneEnds);
  const ownTimes: number[] = [];
  const lagTimes: number[] = [];
  await drive(
    sessions,
    laneEnds.map((end) => end - first).sort((left, right) => left - right),
    ownTimes,
    lagTimes,
  );
  const cpu = process.cpuUsage(cpuBefore);
  agent.destroy();
  const sort = (values: number[]) => values.sort((left, right) => left - right);
  return {
    ownTimes: sort(ownTimes),
    lagTimes: sort(lagTimes),
    cpuMsPerCall: (cpu.user + cpu.system) / 1000 / (ownTimes.length + warmupOwn.length),
  };
}

/** Pins every thread of a process to one CPU (taskset); false where that is not possible. */
function pinToCpu(pid: number | undefined, cpu: number): boolean {
  if (pid === undefined) return false;
  try {
    execFileSync('taskset', ['--all-tasks', '--pid', '--cpu-list', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * This process's garbage collections while each side of the restated goal runs (count and
 * pauses): a call that is due during a pause leaves late by it, so the collector's pauses are
 * what the own-time p99 is made of on either side.
 */
function watchCollections() {
  const tally = { replay: { count: 0, ms: 0 }, bare: { count: 0, ms: 0 } };
  const watch = {
    /** The side now running; collections outside the rounds are not counted. */
    side: undefined as keyof typeof tally | undefined,
    summary: (side: keyof typeof tally) =>
      `${tally[side].count} (${tally[side].ms.toFixed(0)} ms paused, ${(tally[side].ms / Math.max(1, tally[side].count)).toFixed(2)} ms each)`,
    stop: () => observer.disconnect(),
  };
  const observer = new PerformanceObserver((list) => {
    const side = watch.side;
    if (side === undefined) return;
    for (const entry of list.getEntries()) {
      tally[side].count++;
      tally[side].ms += entry.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return watch;
}

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
}

async function main(): Promise<void> {
  checkBenchFlags(
    'node dist/bench/replay.bench.js [--levels 16,32,64,128] [--goal-ms 1] [--goal-sessions 64] [--goal-delta-ms 0.25] [--rounds 4] [--pin]',
  );
  const levels = (flag('--levels') ?? '16,32,64,128,256,512,1024,2048').split(',').map(Number);
  const goalMs = Number(flag('--goal-ms') ?? 1);
  const goalSessions = Number(flag('--goal-sessions') ?? 64);
  const goalDeltaMs = Number(flag('--goal-delta-ms') ?? 0.25);
  const rounds = Number(flag('--rounds') ?? 4);
  const pin = process.argv.includes('--pin');
  // Read before pinning: a pinned process sees one CPU.
  const cpus = availableParallelism();
  let restated: { replay: DrivenCalls; bare: DrivenCalls } | undefined;
  const server = await startReplayServerProcess({
    seed: 'replay-bench',
    ttftMs: [50, 100],
    tokenDelayMs: [5, 10],
    answer: 'The coat is 299 yuan today; with the live-room coupon it comes to 259 yuan.',
  });
  const pinned = pin && cpus >= 2 && pinToCpu(process.pid, 0) && pinToCpu(server.pid, 1);
  if (pin && !pinned) console.warn('--pin: could not pin (needs Linux taskset and 2 CPUs); running unpinned');
  const recorded: ReplaySession[] = syntheticSessions({ count: 64, toolMs: 20 }).map((record, index) => {
    const parsed = parseRecordedSession(record, `synthetic: ${index}`);
    if (!parsed.ok) throw new Error(parsed.unreplayable.detail);
    return parsed.session;
  });
  const client = createModelClient({
    adapter: 'openai',
    baseUrl: `${server.url}/v1`,
    model: 'test-model',
    concurrency: 100_000,
    maxRetries: 0,
    timeoutMs: 60_000,
  });
  const rows: Array<Record<string, string | number>> = [];
  let sustained: number | undefined;
  let broken = false;
  const scheduledSessions = (count: number) =>
    Array.from({ length: count }, (_, index) => ({ session: recorded[index % recorded.length], sessionIndex: index }));
  const replay = (sessions: ScheduledSession[], concurrency: number) =>
    runReplayPart({
      sessions,
      warmup: sessions.slice(0, concurrency),
      client,
      driverFor: (scheduled) => forcedHistoryDriver(scheduled.session, { maxTokensFromRecording: true }),
      load: { kind: 'closed', concurrency },
      rng: new Rng('replay-bench'),
      part: { index: 0, count: 1 },
    });
  /**
   * The restated goal's ratio: `rounds` rounds of the replay and the bare loop over the same
   * sessions, alternating which goes first (bare-replay, replay-bare, ...) so that a change of
   * machine load during the run falls on both; own times pooled over the rounds.
   */
  const restatedGoal = async (
    sessions: ScheduledSession[],
    concurrency: number,
  ): Promise<{ replay: DrivenCalls; bare: DrivenCalls }> => {
    const emptySide = () => ({
      ownTimes: [] as number[],
      lagTimes: [] as number[],
      cpuMs: 0,
      calls: 0,
      roundP99s: [] as number[],
    });
    const pooled = { replay: emptySide(), bare: emptySide() };
    for (let round = 0; round < rounds; round++) {
      for (const side of round % 2 === 0 ? (['bare', 'replay'] as const) : (['replay', 'bare'] as const)) {
        let driven: DrivenCalls;
        collections.side = side;
        if (side === 'bare') {
          driven = await bareReplay(server.url, sessions, concurrency);
        } else {
          const cpuBefore = process.cpuUsage();
          const result = await replay(sessions, concurrency);
          const cpu = process.cpuUsage(cpuBefore);
          driven = {
            ownTimes: [...(result.samples.get('client_overhead_ms') ?? [])],
            lagTimes: [...(result.samples.get('schedule_lag_ms') ?? [])],
            cpuMsPerCall: (cpu.user + cpu.system) / 1000 / Math.max(1, result.calls.length + result.warmup.calls),
          };
        }
        const into = pooled[side];
        into.roundP99s.push((percentilesOf(driven.ownTimes, [99]) as [number])[0]);
        into.ownTimes.push(...driven.ownTimes);
        into.lagTimes.push(...driven.lagTimes);
        into.cpuMs += driven.cpuMsPerCall * driven.ownTimes.length;
        into.calls += driven.ownTimes.length;
        collections.side = undefined;
      }
    }
    const sorted = (side: keyof typeof pooled): DrivenCalls => ({
      ownTimes: pooled[side].ownTimes.sort((left, right) => left - right),
      lagTimes: pooled[side].lagTimes.sort((left, right) => left - right),
      cpuMsPerCall: pooled[side].cpuMs / Math.max(1, pooled[side].calls),
      roundP99s: pooled[side].roundP99s,
    });
    return { replay: sorted('replay'), bare: sorted('bare') };
  };
  const collections = watchCollections();
  try {
    await replay(scheduledSessions(256), 64);
    for (const concurrency of levels) {
      // At least 512 calls a level: a p99 over fewer rests on the worst three or four calls.
      const sessions = scheduledSessions(Math.max(256, concurrency * 4));
      const busyBefore = performance.eventLoopUtilization();
      const cpuBefore = process.cpuUsage();
      const result = await replay(sessions, concurrency);
      const busy = performance.eventLoopUtilization(busyBefore);
      const cpu = process.cpuUsage(cpuBefore);
      const calls = result.calls.filter((call) => call.status === 'ok');
      const [ownP50, ownP99] = percentilesOf(result.samples.get('client_overhead_ms'), [50, 99]) as [number, number];
      const [lagP99] = percentilesOf(result.samples.get('schedule_lag_ms'), [99]) as [number];
      const [ttftP50, ttftP99] = percentilesOf(result.samples.get('ttft_ms'), [50, 99]) as [number, number];
      rows.push({
        sessions: concurrency,
        calls: calls.length,
        failed: result.calls.length - calls.length,
        'own p50 ms': ownP50.toFixed(3),
        'own p99 ms': ownP99.toFixed(3),
        'lag p99 ms': lagP99.toFixed(3),
        'busy ms/call': (busy.active / Math.max(1, result.calls.length)).toFixed(3),
        // CPU time is not inflated by waiting for a core, unlike wall-clock figures on a busy machine.
        'cpu ms/call': (
          (cpu.user + cpu.system) /
          1000 /
          Math.max(1, result.calls.length + result.warmup.calls)
        ).toFixed(3),
        'loop busy': `${(busy.utilization * 100).toFixed(0)}%`,
        'ttft p50 ms': ttftP50.toFixed(1),
        'ttft p99 ms': ttftP99.toFixed(1),
        'req/s': (calls.length / (result.window.durationMs / 1000)).toFixed(0),
      });
      if (concurrency === goalSessions) restated = await restatedGoal(sessions, concurrency);
      const within = ownP99 < goalMs && result.calls.length === calls.length;
      if (within && !broken) sustained = concurrency;
      broken ||= !within;
      // Past the first miss the sweep goes on only as far as the goal's own level, to report it.
      if (broken && concurrency >= goalSessions) break;
    }
  } finally {
    await client.close?.();
    await server.close();
  }
  console.log(
    `replay client overhead per call (closed loop, test server in a child process; ${cpus} CPUs${pinned ? ', this process on CPU 0 and the server on CPU 1' : ''}, load average ${loadavg()[0]?.toFixed(2)})`,
  );
  console.table(rows);
  const atGoal = rows.find((row) => row.sessions === goalSessions);
  if (atGoal)
    console.log(
      `at ${goalSessions} concurrent sessions: own overhead p99 ${atGoal['own p99 ms']} ms (goal < ${goalMs} ms)`,
    );
  if (restated) {
    const figures = (side: DrivenCalls) => {
      const [p50, p99] = percentilesOf(side.ownTimes, [50, 99]) as [number, number];
      const [lagP99] = percentilesOf(side.lagTimes, [99]) as [number];
      return {
        row: {
          calls: side.ownTimes.length,
          'own p50 ms': p50.toFixed(3),
          'own p99 ms': p99.toFixed(3),
          'lag p99 ms': lagP99.toFixed(3),
          'cpu ms/call': side.cpuMsPerCall.toFixed(3),
          'p99 per round ms': (side.roundP99s ?? []).map((value) => value.toFixed(2)).join(' '),
        },
        p99,
      };
    };
    const replayFigures = figures(restated.replay);
    const bareFigures = figures(restated.bare);
    const delta = replayFigures.p99 - bareFigures.p99;
    console.log(
      `restated goal at ${goalSessions} sessions, same run, ${rounds} interleaved rounds each (own time per call, pooled):`,
    );
    console.table({ replay: replayFigures.row, 'bare node:http': bareFigures.row });
    console.log(
      `garbage collections during the rounds: ${(['replay', 'bare'] as const).map((side) => `${side} ${collections.summary(side)}`).join('; ')}`,
    );
    console.log(
      `replay own p99 ${replayFigures.p99.toFixed(3)} ms, bare node:http loop own p99 ${bareFigures.p99.toFixed(3)} ms, ` +
        `difference ${delta.toFixed(3)} ms, ratio ${(replayFigures.p99 / bareFigures.p99).toFixed(2)} (goal: difference <= ${goalDeltaMs} ms: ${delta <= goalDeltaMs ? 'met' : 'NOT met'})`,
    );
  }
  collections.stop();
  console.log(
    sustained === undefined
      ? `the goal breaks already at ${levels[0]} sessions`
      : `highest concurrency within the goal: ${sustained} sessions${sustained === levels.at(-1) ? ' (the largest level tried)' : ''}`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
