import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { HatError } from '../shared/errors';
import { MultiBar, Presets, type SingleBar } from 'cli-progress';
import type { RunStatus, StageStatus, StalledPartStatus } from '../queues/runs/run-control';

/**
 * Live per-stage progress for `hat run --wait`, `hat demo` and `hat stage`: progress bars
 * (cli-progress) when the stream is a terminal, plain lines otherwise (CI logs, pipes): a line
 * per stage when its state or part count changes, and at most every `lineIntervalMs` while it runs.
 */
export interface ProgressView {
  update(stages: readonly StageProgressLine[]): void;
  /** Ends the display (idempotent). */
  stop(): void;
}

/** What one stage shows. */
export interface StageProgressLine {
  name: string;
  state: string;
  partsDone: number;
  partsTotal: number;
  /** Parts (or the stage job) whose worker is gone or stopped renewing their lock (see StageStatus.stalled). */
  stalled?: StalledPartStatus[];
  /** The queue that serves it (the stage's kind). */
  queue?: string;
}

/** Parts per second and time left, from the first sample a stage was seen running. */
export class RateTracker {
  private readonly first = new Map<string, { at: number; done: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  sample(stage: string, done: number, total: number): { rate?: number; etaSeconds?: number } {
    const at = this.now();
    const first = this.first.get(stage);
    if (!first) {
      this.first.set(stage, { at, done });
      return {};
    }
    const seconds = (at - first.at) / 1_000;
    if (seconds <= 0 || done <= first.done) return {};
    const rate = (done - first.done) / seconds;
    return { rate, etaSeconds: total > done ? (total - done) / rate : 0 };
  }
}

function formatEta(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${Math.ceil(seconds)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.ceil(seconds % 60)).padStart(2, '0')}s`;
}

export function describeStage(line: StageProgressLine, rates: { rate?: number; etaSeconds?: number }): string {
  const parts = line.partsTotal > 0 ? `, ${line.partsDone}/${line.partsTotal} parts` : '';
  const stalled =
    line.stalled && line.stalled.length > 0 ? `, ${describeStalled(line.stalled, line.queue ?? line.name)}` : '';
  // A stalled part waits for the stall check, not for the rate so far: no ETA until it runs again.
  const speed =
    line.state === 'running' && line.partsTotal > 0
      ? `, ${rates.rate === undefined ? '?' : rates.rate.toFixed(1)} parts/s, ETA ${stalled ? '?' : formatEta(rates.etaSeconds)}`
      : '';
  return `${line.name}: ${line.state}${parts}${stalled}${speed}`;
}

/**
 * `part-00003 stalled (worker lost), retried in ~45 s`: said while it lasts, so a dead worker's
 * part is not mistaken for a slow one (`hat run --wait`, `hat runs show`).
 */
export function describeStalled(stalled: readonly StalledPartStatus[], queue: string): string {
  const parts = stalled.filter((entry) => entry.part !== undefined).map((entry) => entry.part as string);
  const lost = stalled.every((entry) => entry.cause === 'worker-lost');
  const paused = stalled.every((entry) => entry.cause === 'lock-lapsed');
  const many = stalled.length > 1;
  const cause = lost
    ? many
      ? 'workers lost'
      : 'worker lost'
    : paused
      ? `${many ? 'their workers' : 'its worker'} stopped renewing the lock: paused or hung`
      : 'workers lost or paused';
  const what =
    parts.length === 0
      ? `stalled (${cause})`
      : parts.length === 1 && !many
        ? `${parts[0]} stalled (${cause})`
        : `${stalled.length} parts stalled (${parts.join(', ')}; ${cause})`;
  const waits = stalled.map((entry) => entry.handBackInMs);
  if (waits.some((ms) => ms === undefined)) return `${what}, not retried until a worker serves ${queue}`;
  const longest = Math.max(...(waits as number[]));
  return `${what}, ${longest < 1_000 ? 'retried now' : `retried in ~${Math.ceil(longest / 1_000)} s`}`;
}

/** What a plain line shows of the stalled parts, less the countdown (a new line when it changes). */
function stalledKey(line: StageProgressLine): string {
  return (line.stalled ?? [])
    .map((entry) => `${entry.jobId}:${entry.cause}:${entry.handBackInMs === undefined ? 'unserved' : 'served'}`)
    .join(',');
}

export function createProgressView(
  stream: NodeJS.WritableStream,
  options: { tty?: boolean; lineIntervalMs?: number; now?: () => number } = {},
): ProgressView {
  const tty = options.tty ?? Boolean((stream as NodeJS.WriteStream).isTTY);
  const rates = new RateTracker(options.now);
  if (tty) return barView(stream, rates);
  const interval = options.lineIntervalMs ?? 1_000;
  const last = new Map<string, { state: string; at: number; done: number; total: number; stalled: string }>();
  const now = options.now ?? Date.now;
  return {
    update(stages) {
      for (const stage of stages) {
        const rate = stage.state === 'running' ? rates.sample(stage.name, stage.partsDone, stage.partsTotal) : {};
        const previous = last.get(stage.name);
        const changed =
          !previous ||
          previous.state !== stage.state ||
          previous.total !== stage.partsTotal ||
          previous.stalled !== stalledKey(stage);
        const due =
          previous !== undefined &&
          stage.state === 'running' &&
          previous.done !== stage.partsDone &&
          now() - previous.at >= interval;
        if (changed || due) {
          stream.write(`${describeStage(stage, rate)}\n`);
          last.set(stage.name, {
            state: stage.state,
            at: now(),
            done: stage.partsDone,
            total: stage.partsTotal,
            stalled: stalledKey(stage),
          });
        }
      }
    },
    stop() {},
  };
}

function barView(stream: NodeJS.WritableStream, rates: RateTracker): ProgressView {
  const multibar = new MultiBar(
    {
      stream: stream,
      format: '{stage} |{bar}| {value}/{total} parts | {state} | {rate} | ETA {eta_text}',
      hideCursor: true,
      clearOnComplete: false,
      etaBuffer: 50,
      forceRedraw: true,
    },
    Presets.shades_classic,
  );
  const bars = new Map<string, SingleBar>();
  const width = 16;
  let stopped = false;
  return {
    update(stages) {
      for (const stage of stages) {
        const total = Math.max(1, stage.partsTotal);
        const value = stage.partsTotal > 0 ? stage.partsDone : stage.state === 'completed' ? 1 : 0;
        const rate = stage.state === 'running' ? rates.sample(stage.name, stage.partsDone, stage.partsTotal) : {};
        const payload = {
          stage: stage.name.padEnd(width).slice(0, width),
          state: stage.stalled?.length
            ? `${stage.state}, ${describeStalled(stage.stalled, stage.queue ?? stage.name)}`
            : stage.state,
          rate: rate.rate === undefined ? '- parts/s' : `${rate.rate.toFixed(1)} parts/s`,
          eta_text: stage.state === 'completed' ? '0s' : stage.stalled?.length ? '?' : formatEta(rate.etaSeconds),
        };
        let bar = bars.get(stage.name);
        if (!bar) {
          bar = multibar.create(total, value, payload);
          bars.set(stage.name, bar);
        }
        bar.setTotal(total);
        bar.update(value, payload);
      }
    },
    stop() {
      if (stopped) return;
      stopped = true;
      multibar.stop();
    },
  };
}

/** The progress lines of a run status. */
export function progressLines(status: RunStatus): StageProgressLine[] {
  const lines: StageProgressLine[] = status.stages.map((stage: StageStatus) => ({
    name: stage.name,
    state: stage.state,
    partsDone: stage.partsDone,
    partsTotal: stage.partsTotal,
    ...(stage.stalled ? { stalled: stage.stalled, queue: stage.kind ?? stage.name } : {}),
  }));
  // Each trainer handoff shows as one more line: its state says whether a checkpoint is awaited.
  for (const handoff of status.handoffs ?? [])
    lines.push({ name: `${handoff.name} (handoff)`, state: handoff.state, partsDone: 0, partsTotal: 0 });
  return lines;
}

/**
 * Waits for a run with live progress on stderr, then prints where its report is. Resolves with
 * the final status; the caller decides the exit code.
 */
export async function waitForRunWithProgress(
  watch: (onStatus: (status: RunStatus) => void) => Promise<RunStatus>,
  stderr: NodeJS.WritableStream,
): Promise<RunStatus> {
  const view = createProgressView(stderr);
  try {
    return await watch((status) => view.update(progressLines(status)));
  } finally {
    view.stop();
  }
}

/** The closing lines of a finished run (stderr): outcome, report and manifest locations. */
export function describeRunOutcome(status: RunStatus, written: WrittenRunOutputs): string[] {
  const lines = [
    `run ${status.runId} ${status.state}${status.durationMs !== undefined ? ` in ${(status.durationMs / 1_000).toFixed(1)} s` : ''}`,
  ];
  if (status.error) lines.push(`  ${status.error}`);
  lines.push(...runOutputLines(status, written));
  return lines;
}

/**
 * The report and run manifest lines: a location only for an object that exists, else why it does
 * not (the run job writes both when the run ends; a store outage can leave them unwritten).
 */
export function runOutputLines(status: RunStatus, written: WrittenRunOutputs): string[] {
  const finished = status.state === 'completed' || status.state === 'failed' || status.state === 'cancelled';
  const missing = finished
    ? '(not written: the run job could not write it; see the error above, then `hat runs retry`)'
    : '(not written yet: the run job writes it when the run ends)';
  return [
    `  report:       ${written.report ? status.reportHtmlUri : missing}`,
    `  run manifest: ${written.manifest ? status.runManifestUri : missing}`,
  ];
}

/** The error a followed run that did not complete ends with (`hat run --wait`, `hat demo`), naming its manifest only if it exists. */
export function unfinishedRunError(status: RunStatus, written: WrittenRunOutputs): HatError {
  const see = written.manifest
    ? `see ${status.runManifestUri}`
    : `its run manifest was not written; \`hat runs show ${status.runId}\` shows each stage`;
  return new HatError(
    status.state === 'cancelled' ? 'RUN_CANCELLED' : 'RUN_FAILED',
    `run ${status.runId} ${status.state}; ${see}`,
  );
}

/** Which of a finished run's report and manifest exist (a store outage can leave them unwritten). */
export interface WrittenRunOutputs {
  report: boolean;
  manifest: boolean;
}

/** Looks the run's report and manifest up in the artifact store; one that cannot be looked up counts as not written. */
export async function writtenRunOutputs(
  status: RunStatus,
  openObject: (uri: string) => { store: ArtifactStore; key: string },
): Promise<WrittenRunOutputs> {
  const exists = async (uri: string) => {
    try {
      const { store, key } = openObject(uri);
      return (await store.head(key)) !== undefined;
    } catch {
      return false;
    }
  };
  const [report, manifest] = await Promise.all([exists(status.reportHtmlUri), exists(status.runManifestUri)]);
  return { report, manifest };
}
