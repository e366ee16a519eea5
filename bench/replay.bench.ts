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
 * Prints figures, never asserts on time.
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/replay.bench.js [--levels 16,32,64,128] [--goal-ms 1] [--goal-sessions 64]
 */
import { availableParallelism, loadavg } from 'node:os';
import { percentilesOf } from '../shared/metrics/percentile';
import { createModelClient } from '../shared/models/model-registry';
import { Rng } from '../shared/random/rng';
import { parseRecordedSession, type ReplaySession } from '../workers/replay/recorded-session';
import { runReplayPart, type ScheduledSession } from '../workers/replay/replay-engine';
import { forcedHistoryDriver } from '../workers/replay/session-driver';
import { startReplayServerProcess } from '../workers/replay/testing/replay-test-server-process';
import { syntheticSessions } from '../workers/replay/testing/synthetic-sessions';

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
}

async function main(): Promise<void> {
  const levels = (flag('--levels') ?? '16,32,64,128,256,512,1024,2048').split(',').map(Number);
  const goalMs = Number(flag('--goal-ms') ?? 1);
  const goalSessions = Number(flag('--goal-sessions') ?? 64);
  const server = await startReplayServerProcess({
    seed: 'replay-bench',
    ttftMs: [50, 100],
    tokenDelayMs: [5, 10],
    answer: 'The coat is 299 yuan today; with the live-room coupon it comes to 259 yuan.',
  });
  const recorded: ReplaySession[] = syntheticSessions({ count: 64, toolMs: 20 }).map((record, index) => {
    const parsed = parseRecordedSession(record, `synthetic: ${index}`);
    if (!parsed.ok) throw new Error(parsed.unreplayable.detail);
    return parsed.session;
  });
  const client = createModelClient({ adapter: 'openai', baseUrl: `${server.url}/v1`, model: 'test-model', concurrency: 100_000, maxRetries: 0, timeoutMs: 60_000 });
  const rows: Array<Record<string, string | number>> = [];
  let sustained: number | undefined;
  let broken = false;
  const scheduledSessions = (count: number) => Array.from({ length: count }, (_, index) => ({ session: recorded[index % recorded.length] as ReplaySession, sessionIndex: index }));
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
        'cpu ms/call': ((cpu.user + cpu.system) / 1000 / Math.max(1, result.calls.length + result.warmup.calls)).toFixed(3),
        'loop busy': `${(busy.utilization * 100).toFixed(0)}%`,
        'ttft p50 ms': ttftP50.toFixed(1),
        'ttft p99 ms': ttftP99.toFixed(1),
        'req/s': (calls.length / (result.window.durationMs / 1000)).toFixed(0),
      });
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
  console.log(`replay client overhead per call (closed loop, test server in a child process; ${availableParallelism()} CPUs, load average ${loadavg()[0]?.toFixed(2)})`);
  console.table(rows);
  const atGoal = rows.find((row) => row.sessions === goalSessions);
  if (atGoal) console.log(`at ${goalSessions} concurrent sessions: own overhead p99 ${atGoal['own p99 ms']} ms (goal < ${goalMs} ms)`);
  console.log(sustained === undefined ? `the goal breaks already at ${levels[0]} sessions` : `highest concurrency within the goal: ${sustained} sessions${sustained === levels.at(-1) ? ' (the largest level tried)' : ''}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
