import { z } from 'zod';
import { BadInputError, TransientError } from '../shared/errors';
import { defineStage } from '../queues/stage-kit/define-stage';
import { enqueueRun } from '../queues/runs/flows';
import { planRun } from '../queues/runs/run-config';
import { retryRun, watchRun } from '../queues/runs/run-control';
import { registerStage, unregisterStage } from '../queues/stage-kit/stage-registry';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/**
 * A stage whose fan-in is split into task jobs (`fanInTasks`), through real Redis: the tasks run
 * as jobs of their own once every part is done, a task that fails for a moment is retried, one
 * that fails for good fails the run, `hat runs retry` runs it again, and `finish` gets the task
 * results in task order.
 */
describe('fan-in tasks under BullMQ', () => {
  let kit: QueueTestKit;
  const runs = new Map<string, number>();
  let broken = new Set<string>();
  let partsDoneAtFirstTask: number | undefined;
  const stage = defineStage({
    name: 'fan-in-tasks-test',
    description: 'test stage: parts sum their index; fan-in tasks report the sum under their name',
    input: z.object({ parts: z.number().int().positive(), tasks: z.array(z.string()) }),
    output: z.object({ results: z.array(z.string()) }),
    partInput: z.object({ index: z.number().int() }),
    partOutput: z.object({ value: z.number().int() }),
    queue: { attempts: 2, backoffMs: 10 },
    plan: (input) => Array.from({ length: input.parts }, (_, index) => ({ index })),
    createProcessor: () => async (part) => ({ value: part.index }),
    fanInTasks: {
      task: z.object({ name: z.string() }),
      taskOutput: z.object({ text: z.string() }),
      plan: async (input) => input.tasks.map((name) => ({ name })),
      run: async (_input, parts, task: { name: string }) => {
        partsDoneAtFirstTask ??= parts.length;
        const attempt = (runs.get(task.name) ?? 0) + 1;
        runs.set(task.name, attempt);
        if (task.name === 'flaky' && attempt === 1) throw new TransientError('TEST_FLAKY', 'flaky task, first try');
        if (broken.has(task.name)) throw new BadInputError('TEST_BROKEN', `task ${task.name} is broken`);
        return { text: `${task.name}=${parts.reduce((sum, part) => sum + part.value, 0)}` };
      },
    },
    finish: async (_input, _parts, _deps, tasks) => ({
      results: tasks.map((task) => (task as { text: string }).text),
    }),
  });

  beforeAll(() => registerStage(stage));
  afterAll(() => unregisterStage('fan-in-tasks-test'));
  beforeEach(async () => {
    kit = await createQueueTestKit();
    runs.clear();
    partsDoneAtFirstTask = undefined;
  });
  afterEach(async () => {
    await kit.cleanup();
  });

  const plan = (runId: string, tasks: string[]) =>
    planRun({ runId, stages: { 'fan-in-tasks-test': { parts: 4, tasks } } }, { env: kit.env, now: new Date() });
  const output = async (runId: string) => {
    const status = await watchRun(kit.context, runId, { intervalMs: 100 });
    const job = await kit.context.queue('fan-in-tasks-test').getJob(status.stages[0]?.jobId ?? '');
    return { state: status.state, error: status.error, output: job?.returnvalue?.output as unknown };
  };

  it('runs each task as its own job over every part output, retries a transient failure, and finishes in task order', async () => {
    broken = new Set();
    await kit.startWorkers({ queues: ['fan-in-tasks-test', 'runs'], concurrency: 3 });
    await enqueueRun(kit.context, plan('tasks', ['first', 'flaky', 'last']));
    expect(await output('tasks')).toEqual({
      state: 'completed',
      error: undefined,
      output: { results: ['first=6', 'flaky=6', 'last=6'] },
    });
    expect(partsDoneAtFirstTask).toBe(4);
    expect(Object.fromEntries(runs)).toEqual({ first: 1, flaky: 2, last: 1 });
    const jobs = await kit.context.queue('fan-in-tasks-test').getJobs(['completed']);
    expect(
      jobs
        .filter((job) => job.name === 'fan-in-task')
        .map((job) => job.data.index as number)
        .sort(),
    ).toEqual([0, 1, 2]);
  });

  it('fails the run on a task that fails for good, and `hat runs retry` runs only that task again', async () => {
    broken = new Set(['middle']);
    await kit.startWorkers({ queues: ['fan-in-tasks-test', 'runs'] });
    await enqueueRun(kit.context, plan('broken', ['first', 'middle', 'last']));
    const failed = await output('broken');
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/\[TEST_BROKEN\] task middle is broken/);
    expect(runs.get('middle')).toBe(1);

    broken = new Set();
    const retried = await retryRun(kit.context, 'broken');
    expect(retried.retriedStages).toEqual(['fan-in-tasks-test']);
    expect(await output('broken')).toEqual({
      state: 'completed',
      error: undefined,
      output: { results: ['first=6', 'middle=6', 'last=6'] },
    });
    expect(Object.fromEntries(runs)).toEqual({ first: 1, middle: 2, last: 1 });
  });
});
