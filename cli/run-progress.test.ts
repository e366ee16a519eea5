import { PassThrough } from 'node:stream';
import { RateTracker, createProgressView, describeStage } from './run-progress';

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
