import { PassThrough } from 'node:stream';
import type { RunStatus } from '../queues/runs/run-control';
import { RateTracker, createProgressView, describeRunOutcome, describeStage, unfinishedRunError } from './run-progress';

describe('progress view (plain lines)', () => {
  it('prints a line per stage on state or part-count changes, and running lines with rate and ETA at most once per interval', () => {
    let now = 0;
    const stream = new PassThrough();
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const view = createProgressView(stream, { tty: false, lineIntervalMs: 1_000, now: () => now });
    view.update([{ name: 'collect', state: 'waiting', partsDone: 0, partsTotal: 0 }]);
    view.update([{ name: 'collect', state: 'running', partsDone: 0, partsTotal: 0 }]);
    view.update([{ name: 'collect', state: 'running', partsDone: 0, partsTotal: 20 }]);
    now = 500;
    view.update([{ name: 'collect', state: 'running', partsDone: 5, partsTotal: 20 }]);
    now = 2_000;
    view.update([{ name: 'collect', state: 'running', partsDone: 10, partsTotal: 20 }]);
    now = 3_000;
    view.update([{ name: 'collect', state: 'completed', partsDone: 20, partsTotal: 20 }]);
    view.stop();
    expect(text.trim().split('\n')).toEqual([
      'collect: waiting',
      'collect: running',
      'collect: running, 0/20 parts, ? parts/s, ETA ?',
      'collect: running, 10/20 parts, 5.0 parts/s, ETA 2s',
      'collect: completed, 20/20 parts',
    ]);
  });
});

describe('RateTracker', () => {
  it('measures parts per second from the first sample and the time left', () => {
    let now = 10_000;
    const tracker = new RateTracker(() => now);
    expect(tracker.sample('s', 4, 100)).toEqual({});
    now = 14_000;
    expect(tracker.sample('s', 24, 100)).toEqual({ rate: 5, etaSeconds: 15.2 });
  });
});

describe('describeStage', () => {
  const line = { name: 'shard', state: 'running', partsDone: 3, partsTotal: 10 };
  const lost = { part: 'part-00003', jobId: 'r.shard.part-00003.0123456789ab', cause: 'worker-lost' as const };

  it('names a stalled part, why, and when it is retried, in place of a stale ETA', () => {
    expect(describeStage({ ...line, stalled: [{ ...lost, handBackInMs: 44_200 }] }, { rate: 2, etaSeconds: 4 })).toBe(
      'shard: running, 3/10 parts, part-00003 stalled (worker lost), retried in ~45 s, 2.0 parts/s, ETA ?',
    );
    expect(describeStage({ ...line, stalled: [{ ...lost, handBackInMs: 300 }] }, {})).toBe(
      'shard: running, 3/10 parts, part-00003 stalled (worker lost), retried now, ? parts/s, ETA ?',
    );
    expect(describeStage(line, { rate: 2, etaSeconds: 4 })).toBe('shard: running, 3/10 parts, 2.0 parts/s, ETA 4s');
  });

  it('says when nothing will retry it, several parts at once, a paused worker, and a stalled single job', () => {
    expect(describeStage({ ...line, name: 'sft_data', queue: 'shard', stalled: [lost] }, {})).toBe(
      'sft_data: running, 3/10 parts, part-00003 stalled (worker lost), not retried until a worker serves shard, ? parts/s, ETA ?',
    );
    const second = { ...lost, part: 'part-00007', jobId: 'r.shard.part-00007.0123456789ab' };
    expect(
      describeStage(
        {
          ...line,
          stalled: [
            { ...lost, handBackInMs: 5_000 },
            { ...second, handBackInMs: 35_000 },
          ],
        },
        {},
      ),
    ).toBe(
      'shard: running, 3/10 parts, 2 parts stalled (part-00003, part-00007; workers lost), retried in ~35 s, ? parts/s, ETA ?',
    );
    expect(describeStage({ ...line, stalled: [{ ...lost, cause: 'lock-lapsed', handBackInMs: 12_000 }] }, {})).toBe(
      'shard: running, 3/10 parts, part-00003 stalled (its worker stopped renewing the lock: paused or hung), retried in ~12 s, ? parts/s, ETA ?',
    );
    const gate = { name: 'gate', state: 'running', partsDone: 0, partsTotal: 0 };
    expect(
      describeStage(
        { ...gate, stalled: [{ jobId: 'r.gate.0123456789ab', cause: 'worker-lost', handBackInMs: 58_000 }] },
        {},
      ),
    ).toBe('gate: running, stalled (worker lost), retried in ~58 s');
  });

  it('prints a plain line when a part stalls, when a worker can take it and when it runs again, not for each second of the countdown', () => {
    let now = 0;
    const stream = new PassThrough();
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const view = createProgressView(stream, { tty: false, lineIntervalMs: 1_000, now: () => now });
    view.update([line]);
    view.update([{ ...line, stalled: [lost] }]);
    now = 2_000;
    view.update([{ ...line, stalled: [{ ...lost, handBackInMs: 40_000 }] }]);
    now = 5_000;
    view.update([{ ...line, stalled: [{ ...lost, handBackInMs: 35_000 }] }]);
    now = 41_000;
    view.update([line]);
    expect(text.trim().split('\n')).toEqual([
      'shard: running, 3/10 parts, ? parts/s, ETA ?',
      'shard: running, 3/10 parts, part-00003 stalled (worker lost), not retried until a worker serves shard, ? parts/s, ETA ?',
      'shard: running, 3/10 parts, part-00003 stalled (worker lost), retried in ~40 s, ? parts/s, ETA ?',
      'shard: running, 3/10 parts, ? parts/s, ETA ?',
    ]);
  });
});

describe('the closing lines of a followed run (hat run --wait, hat demo)', () => {
  const status = {
    runId: 'r1',
    state: 'failed',
    reportHtmlUri: 's3://hat/runs/r1/run-report.html',
    runManifestUri: 's3://hat/runs/r1/manifest.json',
  } as RunStatus;

  it('name the report and run manifest only where they were written', () => {
    const none = describeRunOutcome(status, { report: false, manifest: false }).join('\n');
    expect(none).not.toContain('s3://');
    expect(none).toContain('report:       (not written: the run job could not write it');
    expect(describeRunOutcome(status, { report: true, manifest: false }).join('\n')).toContain(
      'report:       s3://hat/runs/r1/run-report.html',
    );
    expect(unfinishedRunError(status, { report: false, manifest: false }).message).toBe(
      '[RUN_FAILED] run r1 failed; its run manifest was not written; `hat runs show r1` shows each stage',
    );
    expect(unfinishedRunError({ ...status, state: 'cancelled' }, { report: true, manifest: true }).message).toBe(
      '[RUN_CANCELLED] run r1 cancelled; see s3://hat/runs/r1/manifest.json',
    );
  });
});
