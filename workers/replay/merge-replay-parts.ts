import { SampleSet } from '../../shared/metrics/sample-set';
import type { ClientHealth, CounterReading } from './replay-engine';
import type { ReplayPartFile } from './replay-part-file';
import type { ReplayCallRecord, ReplaySessionRecord, ReplayTurnRecord } from './replay-records';
import type { UnreplayableSession } from './recorded-session';
import type { TargetInfo } from './target-info';

/** Every part's records and samples as one replay. */
export interface MergedReplay {
  parts: number;
  target: TargetInfo;
  /** Union of the parts' measured phases, epoch ms. */
  window: { startEpochMs: number; endEpochMs: number; durationMs: number };
  warmup: { sessions: number; calls: number; failedCalls: number };
  /** Ordered by session index, then call index. */
  calls: ReplayCallRecord[];
  /** Ordered by session index, then turn index. */
  turns: ReplayTurnRecord[];
  sessions: ReplaySessionRecord[];
  samples: SampleSet;
  /** Earliest reading before and latest after, over all parts. */
  specDecode: { before?: CounterReading; after?: CounterReading; errors: string[] };
  unreplayable: UnreplayableSession[];
  /** The worst part's figures. */
  client: ClientHealth;
}

/**
 * Merges part files exactly: records and raw samples are concatenated (percentiles of the merge
 * are percentiles of the union), the measured window is the union of the parts' windows, and
 * the spec-decode delta spans the earliest "before" and the latest "after" reading, because
 * parts running side by side read the same server-wide counters: adding per-part deltas would
 * count overlapping traffic twice.
 */
export function mergeReplayParts(parts: ReadonlyArray<ReplayPartFile & { sampleSet: SampleSet }>): MergedReplay {
  const ordered = [...parts].sort((left, right) => left.part.index - right.part.index);
  const first = ordered[0];
  if (!first) throw new Error('mergeReplayParts needs at least one part');
  const startEpochMs = Math.min(...ordered.map((part) => part.window.startEpochMs));
  const endEpochMs = Math.max(...ordered.map((part) => part.window.endEpochMs));
  const befores = ordered.flatMap((part) => (part.specDecode.before ? [part.specDecode.before] : []));
  const afters = ordered.flatMap((part) => (part.specDecode.after ? [part.specDecode.after] : []));
  const earliest = befores.sort((left, right) => left.atEpochMs - right.atEpochMs)[0];
  const latest = afters.sort((left, right) => right.atEpochMs - left.atEpochMs)[0];
  const bySessionThenCall = (
    left: { sessionIndex: number; callIndex?: number },
    right: { sessionIndex: number; callIndex?: number },
  ) => left.sessionIndex - right.sessionIndex || (left.callIndex ?? 0) - (right.callIndex ?? 0);
  return {
    parts: ordered.length,
    target: first.target,
    window: { startEpochMs, endEpochMs, durationMs: endEpochMs - startEpochMs },
    warmup: {
      sessions: ordered.reduce((sum, part) => sum + part.warmup.sessions, 0),
      calls: ordered.reduce((sum, part) => sum + part.warmup.calls, 0),
      failedCalls: ordered.reduce((sum, part) => sum + part.warmup.failedCalls, 0),
    },
    calls: ordered.flatMap((part) => part.calls).sort(bySessionThenCall),
    turns: ordered
      .flatMap((part) => part.turns)
      .sort((left, right) => left.sessionIndex - right.sessionIndex || left.turnIndex - right.turnIndex),
    sessions: ordered.flatMap((part) => part.sessions).sort(bySessionThenCall),
    samples: SampleSet.union(ordered.map((part) => part.sampleSet)),
    specDecode: {
      ...(earliest ? { before: earliest } : {}),
      ...(latest ? { after: latest } : {}),
      errors: [...new Set(ordered.flatMap((part) => (part.specDecode.error ? [part.specDecode.error] : [])))],
    },
    unreplayable: ordered.flatMap((part) => part.unreplayable),
    client: {
      eventLoopDelayP99Ms: Math.max(...ordered.map((part) => part.client.eventLoopDelayP99Ms)),
      ...(ordered.every((part) => part.client.eventLoopDelayP999Ms !== undefined)
        ? { eventLoopDelayP999Ms: Math.max(...ordered.map((part) => part.client.eventLoopDelayP999Ms as number)) }
        : {}),
      eventLoopDelayMaxMs: Math.max(...ordered.map((part) => part.client.eventLoopDelayMaxMs)),
      eventLoopUtilization: Math.max(...ordered.map((part) => part.client.eventLoopUtilization)),
      ...(ordered.every((part) => part.client.bareLoopDelayP99Ms !== undefined)
        ? { bareLoopDelayP99Ms: Math.max(...ordered.map((part) => part.client.bareLoopDelayP99Ms as number)) }
        : {}),
    },
  };
}
