import { z } from 'zod';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { readManifest } from '../../shared/artifacts/manifest';
import { BadInputError, TransientError } from '../../shared/errors';
import { silentLogger } from '../../shared/log/logger';
import { fanoutDemoStage } from '../../workers/examples/fanout-demo/processor';
import { defineStage } from './define-stage';
import { runStageLocally, type LocalStageProgress } from './run-stage-locally';

const clock = { now: () => Date.parse('2025-01-01T00:00:00Z') };

function options(store: MemoryArtifactStore, extra: Partial<Parameters<typeof runStageLocally>[2]> = {}) {
  return {
    store,
    openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
    logger: silentLogger(),
    clock,
    ...extra,
  };
}

describe('runStageLocally', () => {
  it('plans, runs every part and fans in, writing the manifest; the same seed gives the same bytes', async () => {
    const first = new MemoryArtifactStore('one');
    const progress: LocalStageProgress[] = [];
    const result = await runStageLocally(
      fanoutDemoStage,
      { parts: 4, recordsPerPart: 3 },
      options(first, { seed: '9', onProgress: (report) => progress.push(report) }),
    );
    expect(result).toEqual({ output: { manifestUri: 'memory://one/manifest.json', parts: 4, records: 12 }, parts: 4 });
    expect((await readManifest(first, 'manifest.json')).objects.map((object) => object.key)).toEqual([
      'part-00000.jsonl.gz',
      'part-00001.jsonl.gz',
      'part-00002.jsonl.gz',
      'part-00003.jsonl.gz',
    ]);
    expect(progress.map((report) => `${report.phase}:${report.partsDone}/${report.partsTotal}`)).toEqual([
      'plan:0/0',
      'parts:0/4',
      'parts:1/4',
      'parts:2/4',
      'parts:3/4',
      'parts:4/4',
      'finish:4/4',
      'done:4/4',
    ]);

    const second = new MemoryArtifactStore('two');
    await runStageLocally(fanoutDemoStage, { parts: 4, recordsPerPart: 3 }, options(second, { seed: '9' }));
    for (let index = 0; index < 4; index++) {
      const key = `part-0000${index}.jsonl.gz`;
      expect((await second.getBuffer(key)).equals(await first.getBuffer(key))).toBe(true);
    }
  });

  describe('with a counting test stage', () => {
    const calls: number[] = [];
    let failures: Record<number, 'transient' | 'bad'> = {};
    const stage = defineStage({
      name: 'local-test',
      description: 'test stage',
      input: z.object({ parts: z.number().int() }),
      output: z.object({ sum: z.number() }),
      partInput: z.object({ index: z.number().int() }),
      partOutput: z.object({ value: z.number() }),
      queue: { attempts: 3, backoffMs: 1, concurrency: 2 },
      plan: (input) => Array.from({ length: input.parts }, (_, index) => ({ index })),
      createProcessor: (deps) => async (part) => {
        calls.push(part.index);
        const failure = failures[part.index];
        if (failure === 'bad') throw new BadInputError('TEST_BAD', `part ${part.index} is bad`);
        if (failure === 'transient' && deps.attempt === 1) throw new TransientError('TEST_FLAKY', 'try again');
        return { value: part.index * 10 };
      },
      finish: async (_input, parts) => ({ sum: parts.reduce((total, part) => total + part.value, 0) }),
    });
    beforeEach(() => {
      calls.length = 0;
      failures = {};
    });

    it('retries transient part failures with the stage attempts', async () => {
      failures = { 1: 'transient' };
      const result = await runStageLocally(stage, { parts: 3 }, options(new MemoryArtifactStore()));
      expect(result.output).toEqual({ sum: 30 });
      expect(calls.filter((index) => index === 1)).toHaveLength(2);
    });

    it('stops at the first bad-input failure without retrying it', async () => {
      failures = { 0: 'bad' };
      await expect(runStageLocally(stage, { parts: 2 }, options(new MemoryArtifactStore()))).rejects.toThrow(
        /^\[TEST_BAD\] part 0 is bad/,
      );
      expect(calls.filter((index) => index === 0)).toHaveLength(1);
    });

    it('resumes: parts that finished before (their markers are there) are not processed again', async () => {
      const store = new MemoryArtifactStore();
      failures = { 2: 'bad' };
      await expect(runStageLocally(stage, { parts: 3 }, options(store, { concurrency: 1 }))).rejects.toThrow(
        /TEST_BAD/,
      );
      expect(calls).toEqual([0, 1, 2]);
      failures = {};
      calls.length = 0;
      expect((await runStageLocally(stage, { parts: 3 }, options(store))).output).toEqual({ sum: 30 });
      expect(calls).toEqual([2]);
    });

    it('refuses input that does not match the stage schema, naming the field', async () => {
      await expect(runStageLocally(stage, { parts: 'two' }, options(new MemoryArtifactStore()))).rejects.toThrow(
        /\[STAGE_INPUT_INVALID\][\s\S]*parts: /,
      );
      expect(calls).toEqual([]);
    });
  });

  describe('with fan-in tasks', () => {
    const seen: Array<{ task: string; parts: number[] }> = [];
    const stage = defineStage({
      name: 'fan-in-tasks-test',
      description: 'test',
      input: z.object({ parts: z.number().int(), tasks: z.array(z.string()) }),
      output: z.object({ results: z.array(z.string()) }),
      partInput: z.object({ index: z.number() }),
      partOutput: z.object({ value: z.number() }),
      plan: (input: { parts: number }) => Array.from({ length: input.parts }, (_, index) => ({ index })),
      createProcessor: () => async (part: { index: number }) => ({ value: part.index * 10 }),
      fanInTasks: {
        task: z.object({ name: z.string() }),
        taskOutput: z.object({ text: z.string() }),
        plan: async (input: { tasks: string[] }) => input.tasks.map((name) => ({ name })),
        run: async (_input: unknown, parts: Array<{ value: number }>, task: { name: string }) => {
          seen.push({ task: task.name, parts: parts.map((part) => part.value) });
          // Later tasks end first: results still come back in task order.
          await new Promise((resolve) => setTimeout(resolve, task.name === 'first' ? 20 : 1));
          return { text: `${task.name}:${parts.reduce((sum, part) => sum + part.value, 0)}` };
        },
      },
      finish: async (_input: unknown, parts: Array<{ value: number }>, _deps: unknown, tasks: unknown[]) => ({
        results: tasks.length > 0 ? tasks.map((task) => (task as { text: string }).text) : [`alone:${parts.length}`],
      }),
    });

    it('runs each task over every part output and gives finish their results in task order', async () => {
      seen.length = 0;
      const result = await runStageLocally(
        stage,
        { parts: 3, tasks: ['first', 'second', 'third'] },
        options(new MemoryArtifactStore(), { concurrency: 3 }),
      );
      expect(result.output).toEqual({ results: ['first:30', 'second:30', 'third:30'] });
      expect(seen.map((entry) => entry.parts)).toEqual([
        [0, 10, 20],
        [0, 10, 20],
        [0, 10, 20],
      ]);
    });

    it('leaves the whole fan-in to finish when the plan makes no task', async () => {
      expect(
        (await runStageLocally(stage, { parts: 2, tasks: [] }, options(new MemoryArtifactStore()))).output,
      ).toEqual({ results: ['alone:2'] });
    });
  });
});
