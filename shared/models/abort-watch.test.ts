import { unwatchAbort, watchAbort } from './abort-watch';

describe('abort watch', () => {
  test('runs every watching callback once when its signal aborts, and none it forgot', () => {
    const controller = new AbortController();
    const other = new AbortController();
    const ran: string[] = [];
    const forgotten = () => ran.push('forgotten');
    watchAbort(controller.signal, () => ran.push('first'));
    watchAbort(controller.signal, forgotten);
    // A callback that forgets another while the signal fans out does not stop the rest.
    watchAbort(controller.signal, () => {
      ran.push('second');
      unwatchAbort(controller.signal, forgotten);
    });
    watchAbort(other.signal, () => ran.push('other'));
    unwatchAbort(controller.signal, forgotten);
    controller.abort();
    controller.abort();
    expect(ran).toEqual(['first', 'second']);
    other.abort();
    expect(ran).toEqual(['first', 'second', 'other']);
  });

  test('keeps one listener on the signal however many callbacks watch it', () => {
    const controller = new AbortController();
    const added = jest.spyOn(controller.signal, 'addEventListener');
    const callbacks = Array.from({ length: 1000 }, () => jest.fn());
    for (const callback of callbacks) watchAbort(controller.signal, callback);
    for (const callback of callbacks.slice(0, 500)) unwatchAbort(controller.signal, callback);
    controller.abort();
    expect(added).toHaveBeenCalledTimes(1);
    expect(callbacks.filter((callback) => callback.mock.calls.length === 1)).toHaveLength(500);
    expect(callbacks.slice(0, 500).every((callback) => callback.mock.calls.length === 0)).toBe(true);
  });
});
