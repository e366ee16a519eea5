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
  it('says how many parts are stalled while it lasts', () => {
    const line = { name: 'collect', state: 'running', partsDone: 3, partsTotal: 10 };
    expect(describeStage({ ...line, partsStalled: 2 }, {})).toBe(
      'collect: running, 3/10 parts, 2 parts stalled (their workers stopped; handed to another worker within the stalled interval), ? parts/s, ETA ?',
    );
    expect(describeStage(line, {})).toBe('collect: running, 3/10 parts, ? parts/s, ETA ?');
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
