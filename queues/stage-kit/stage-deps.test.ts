import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { silentLogger } from '../../shared/log/logger';
import { buildStageDeps } from './stage-execution';

/** A stage's deps are a plain object: a spread copy (`{ ...deps, logger }`) keeps every field. */

function deps(signal: AbortSignal | (() => AbortSignal)) {
  const store = new MemoryArtifactStore('deps');
  return buildStageDeps({
    store,
    outputPrefix: 'runs/r/collect/',
    openObject: (uri) => ({ store, key: store.keyOf(uri) }),
    runId: 'r',
    seed: 's',
    stage: 'collect',
    part: { id: 'part-0', index: 0, count: 1 },
    attempt: 1,
    logger: silentLogger(),
    clock: { now: () => 0 },
    progress: () => undefined,
    signal,
    services: {},
  });
}

it('a spread copy of deps carries the job signal, output, rng, logger and progress', () => {
  const controller = new AbortController();
  const copy = { ...deps(controller.signal) };
  expect(copy.signal).toBe(controller.signal);
  expect(copy.output.prefix).toBe('runs/r/collect/');
  expect(typeof copy.rng.next()).toBe('number');
  expect(typeof copy.logger.info).toBe('function');
  expect(typeof copy.progress).toBe('function');
  controller.abort();
  expect(copy.signal.aborted).toBe(true);
});

it('builds a lazy signal once, on first use, and the same rng stream as a fresh deps', () => {
  let made = 0;
  const lazy = deps(() => {
    made++;
    return new AbortController().signal;
  });
  expect(made).toBe(0);
  expect(lazy.signal).toBe(lazy.signal);
  expect(made).toBe(1);
  expect(deps(() => new AbortController().signal).rng.next()).toBe(lazy.rng.next());
});
