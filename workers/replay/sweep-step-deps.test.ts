import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { silentLogger } from '../../shared/log/logger';
import type { StageProgress } from '../../queues/stage-kit/define-stage';
import { buildStageDeps } from '../../queues/stage-kit/stage-execution';
import { sweepStepDeps } from './processor';

describe('sweepStepDeps', () => {
  // The framework's deps build output, progress, rng, logger and signal on first use; a step's
  // deps must still carry them (a spread copy once left them out: no cancel signal in a step).
  it("keeps the job's progress, signal and logger, writes under step-NN/ and runs outside any part", () => {
    const store = new MemoryArtifactStore('sweep');
    const controller = new AbortController();
    const reports: StageProgress[] = [];
    const logger = silentLogger();
    const deps = buildStageDeps({
      store,
      outputPrefix: 'runs/r1/replay/',
      openObject: (uri) => ({ store, key: store.keyOf(uri) }),
      runId: 'r1',
      seed: 'seed',
      stage: 'replay',
      part: { index: 0, id: 'part-00000', count: 1 },
      attempt: 2,
      logger,
      clock: { now: () => 0 },
      progress: (report) => reports.push(report),
      signal: () => controller.signal,
      services: {},
    });

    const step = sweepStepDeps(deps, 3);

    expect(step.output.prefix).toBe('runs/r1/replay/step-03/');
    expect(step.output.key('report.json')).toBe('runs/r1/replay/step-03/report.json');
    expect(step.part).toBeUndefined();
    expect(step.attempt).toBe(2);
    expect(step.run).toEqual({ id: 'r1', seed: 'seed' });
    step.progress({ done: 1, total: 4, message: 'step 1' });
    expect(reports).toEqual([{ done: 1, total: 4, message: 'step 1' }]);
    expect(step.signal.aborted).toBe(false);
    controller.abort();
    expect(step.signal.aborted).toBe(true);
    expect(step.logger).toBeDefined();
    expect(typeof step.logger.info).toBe('function');
    expect(typeof step.rng.fork).toBe('function');
  });
});
