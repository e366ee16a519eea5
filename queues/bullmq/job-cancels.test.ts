import { WaitingError } from 'bullmq';
import { z } from 'zod';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { silentLogger } from '../../shared/log/logger';
import { defineStage } from '../stage-kit/define-stage';
import { JobCancels } from './job-cancels';
import {
  createInProcessStageJobProcessor,
  createStageJobProcessor,
  type StageJobHandle,
  type StageJobRuntime,
} from './stage-job-processor';

/** A stage job handle that records what the binding does with it. */
function fakeJob(id: string): StageJobHandle & { calls: string[] } {
  const calls: string[] = [];
  return {
    id,
    name: 'stage',
    attemptsMade: 0,
    opts: {},
    queueQualifiedName: 'test:cancel-test',
    data: {
      v: 1,
      runId: 'r',
      stage: 'cancel-test',
      seed: '0',
      artifactsRoot: 'memory://cancel',
      outputPrefix: 'runs/r/cancel-test/',
      input: {},
      inputHash: 'h',
    },
    calls,
    updateData: async () => undefined,
    updateProgress: async () => undefined,
    moveToWaitingChildren: async () => false,
    moveToWait: async (token?: string) => {
      calls.push(`moveToWait:${token}`);
    },
    moveToDelayed: async () => undefined,
    getChildrenValues: async () => ({}),
  };
}

describe('stage job cancellation without a per-job AbortController', () => {
  const store = new MemoryArtifactStore('cancel');
  const runtime: StageJobRuntime = {
    jobDataLimit: 100_000,
    logger: silentLogger(),
    clock: { now: () => 0 },
    services: {},
    storeFor: () => store,
    openObject: (uri) => ({ store, key: store.keyOf(uri) }),
    addParts: async () => undefined,
    isRunCancelled: async () => false,
  };
  /** Waits until released; `watch: true` also stops when its signal aborts (recording the reason). */
  let release: () => void = () => undefined;
  const seen: string[] = [];
  const stage = defineStage({
    name: 'cancel-test',
    description: 'test stage',
    input: z.object({ watch: z.boolean().default(false) }),
    output: z.object({ done: z.boolean() }),
    createProcessor: (deps) => async (input: { watch: boolean }) => {
      await new Promise<void>((resolve, reject) => {
        release = resolve;
        if (input.watch)
          deps.signal.addEventListener('abort', () => reject(new Error(`aborted: ${String(deps.signal.reason)}`)));
      });
      if (input.watch) seen.push('finished');
      return { done: true };
    },
  });

  it('declares two parameters, so BullMQ makes no AbortController per job', () => {
    expect(createInProcessStageJobProcessor(stage, runtime, new JobCancels()).length).toBe(2);
    expect(createStageJobProcessor(stage, runtime).length).toBe(3);
  });

  it('hands a job that ignores its signal back to the wait list when the worker cancels all jobs', async () => {
    const cancels = new JobCancels();
    const job = fakeJob('j1');
    const running = createInProcessStageJobProcessor(stage, runtime, cancels)(job, 'tok');
    await new Promise((resolve) => setImmediate(resolve));
    cancels.cancelAll('shutdown');
    await expect(running).rejects.toBeInstanceOf(WaitingError);
    expect(job.calls).toEqual(['moveToWait:tok']);
    release();
  });

  it('aborts the signal a job read, by job id, and finishes jobs that are not cancelled', async () => {
    const cancels = new JobCancels();
    const processor = createInProcessStageJobProcessor(stage, runtime, cancels);
    const watched = fakeJob('j2');
    const running = processor({ ...watched, data: { ...(watched.data as object), input: { watch: true } } }, 'tok');
    await new Promise((resolve) => setImmediate(resolve));
    expect(cancels.cancel('other', 'x')).toBe(false);
    expect(cancels.cancel('j2', 'stop')).toBe(true);
    await expect(running).rejects.toBeInstanceOf(WaitingError);
    expect(watched.calls).toEqual(['moveToWait:tok']);

    const plain = fakeJob('j3');
    const finishing = processor(plain, 'tok');
    await new Promise((resolve) => setImmediate(resolve));
    release();
    await expect(finishing).resolves.toMatchObject({ kind: 'stage', output: { done: true } });
    // Ended jobs leave the registry: cancelling them again finds nothing.
    expect(cancels.cancel('j2')).toBe(false);
    expect(cancels.cancel('j3')).toBe(false);
    expect(plain.calls).toEqual([]);
  });

  it('follows an external signal (sandboxed jobs)', async () => {
    const controller = new AbortController();
    const job = fakeJob('j4');
    const running = createStageJobProcessor(stage, runtime)(job, 'tok', controller.signal);
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort('shutdown');
    await expect(running).rejects.toBeInstanceOf(WaitingError);
    expect(job.calls).toEqual(['moveToWait:tok']);
    release();
  });
});
