/**
 * Callbacks to run when a signal aborts, behind one 'abort' listener per signal. Every model call
 * and every timed wait of a replay listens on its part's signal; Node's EventTarget made adding
 * and removing a listener per call a measurable share of the client's own time (and with
 * thousands of calls in flight, a long listener list). A Set add and delete cost far less.
 */
const watchers = new WeakMap<AbortSignal, Set<() => void>>();

/** Runs `callback` once when `signal` aborts (not at all when it already has: check `aborted` first). */
export function watchAbort(signal: AbortSignal, callback: () => void): void {
  let callbacks = watchers.get(signal);
  if (callbacks === undefined) {
    const created = new Set<() => void>();
    callbacks = created;
    watchers.set(signal, created);
    signal.addEventListener(
      'abort',
      () => {
        watchers.delete(signal);
        for (const run of [...created]) run();
      },
      { once: true },
    );
  }
  callbacks.add(callback);
}

/** Forgets a callback given to watchAbort (the work it guarded has ended). */
export function unwatchAbort(signal: AbortSignal, callback: () => void): void {
  watchers.get(signal)?.delete(callback);
}
