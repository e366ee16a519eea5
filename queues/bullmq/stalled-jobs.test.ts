import { handBackInMs, uniqueWorkerName } from './stalled-jobs';

describe('handBackInMs', () => {
  const interval = 30_000;
  it('is the next stall check for a marked job whose lock is gone, one check later for an unmarked one', () => {
    expect(handBackInMs({ lockLeftMs: 0, marked: true, nextCheckInMs: 12_000, intervalMs: interval })).toBe(12_000);
    expect(handBackInMs({ lockLeftMs: 0, marked: false, nextCheckInMs: 12_000, intervalMs: interval })).toBe(42_000);
  });

  it('waits out what is left of the lock: the first check after it lapses', () => {
    // A worker killed with 50 s of its 60 s lock left, checks at 5 s, 35 s, 65 s: handed back at 65 s.
    expect(handBackInMs({ lockLeftMs: 50_000, marked: true, nextCheckInMs: 5_000, intervalMs: interval })).toBe(65_000);
    expect(handBackInMs({ lockLeftMs: 35_000, marked: false, nextCheckInMs: 5_000, intervalMs: interval })).toBe(
      35_000,
    );
  });
});

describe('uniqueWorkerName', () => {
  it('names host and process, different for each worker, and fit for CLIENT SETNAME', () => {
    const first = uniqueWorkerName();
    expect(first).toMatch(new RegExp(`^[A-Za-z0-9._-]+\\.${process.pid}\\.[0-9a-f]{6}$`));
    expect(uniqueWorkerName()).not.toBe(first);
  });
});
