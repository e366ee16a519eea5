import { existsSync } from 'node:fs';
import { cp, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readManifest } from '../shared/artifacts/manifest';
import { sha256Hex } from '../shared/hash/hash';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { trajectorySchema } from '../shared/trajectory/trajectory';
import type { CollectOutput } from '../workers/collect/collect-contract';
import { runHatInProcess } from './support/hat-in-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * The collect stage as an operator runs it: `hat stage collect` in-process on 500 generated
 * tasks with the scripted teacher, the same through real queues with `hat run` (a worker in this
 * process), identical accepted trajectories from both, parts not redone on a rerun, and bad
 * input refused with exit 2 before anything is written.
 */

const taskCount = 500;
const seed = 'collect-it';

async function objectsOf(directory: string, manifestKey: string) {
  return (await readManifest(new FileArtifactStore(directory), manifestKey)).objects;
}

/** Decompressed accepted trajectories of a stage output, in part order. */
async function acceptedText(directory: string, manifestKey: string): Promise<string> {
  const accepted = (await objectsOf(directory, manifestKey)).filter((object) => object.kind === 'trajectories');
  const texts = await Promise.all(
    accepted.map(async (object) => gunzipSync(await readFile(join(directory, object.key))).toString('utf8')),
  );
  return texts.join('');
}

describe('collect stage (hat stage collect, hat run)', () => {
  let directory: string;
  let tasksFile: string;
  const environment = { ...process.env, HAT_LOG_LEVEL: 'silent' };

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-collect-'));
    tasksFile = join(directory, 'tasks.jsonl.gz');
    const generated = await runHatInProcess(
      environment,
      'tasks',
      'generate',
      '--count',
      String(taskCount),
      '--seed',
      seed,
      '--items',
      '400',
      '--out',
      tasksFile,
    );
    expect(generated.code).toBe(0);
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  describe('in-process and through queues', () => {
    let kit: QueueTestKit;
    beforeAll(async () => {
      kit = await createQueueTestKit({ HAT_LOG_LEVEL: 'silent' });
    });
    afterAll(async () => {
      await kit.cleanup();
    });

    it('hat stage collect and hat run give identical accepted trajectories; a rerun redoes only a part whose output is gone', async () => {
      const config = join(directory, 'collect.yaml');
      await writeFile(config, 'tasksPerPart: 100\nselection: { minReward: 0.9 }\n');
      const localDirectory = join(directory, 'local');
      const out = pathToFileURL(localDirectory).href;
      const local = await runHatInProcess(
        environment,
        'stage',
        'collect',
        '--config',
        config,
        '--in',
        tasksFile,
        '--out',
        out,
        '--seed',
        seed,
        '--json',
      );
      expect(local.stderr).toContain('collect: completed, 5/5 parts');
      expect(local.code).toBe(0);
      const output = JSON.parse(local.stdout) as CollectOutput;
      expect(output).toMatchObject({
        manifestUri: `${out}/manifest.json`,
        tasks: taskCount,
        samples: taskCount,
        review: 0,
        rejected: 0,
        accepted: taskCount,
        acceptanceRate: 1,
      });

      const objects = await objectsOf(localDirectory, 'manifest.json');
      expect(
        objects.filter((object) => object.kind === 'trajectories').map((object) => [object.key, object.records]),
      ).toEqual([0, 1, 2, 3, 4].map((part) => [`part-0000${part}.accepted.jsonl.gz`, 100]));
      expect(objects.filter((object) => object.kind === 'tasks').map((object) => object.key)).toEqual(
        [0, 1, 2, 3, 4].map((part) => `tasks/part-0000${part}.jsonl.gz`),
      );
      expect(
        objects
          .filter((object) => object.kind !== 'trajectories' && object.kind !== 'tasks' && object.kind !== 'rejected')
          .map((object) => object.key),
      ).toEqual(['report.html', 'review.jsonl.gz', 'stats.json']);

      // Every accepted record is a Trajectory played by the scripted expert under the sample harness, in task order.
      const text = await acceptedText(localDirectory, 'manifest.json');
      const trajectories = text
        .trim()
        .split('\n')
        .map((line) => trajectorySchema.parse(JSON.parse(line)));
      expect(trajectories.map((trajectory) => trajectory.taskId)).toEqual(
        generateTasks({ count: taskCount, seed, world: { itemCount: 400 } }).map((task) => task.id),
      );
      expect(
        trajectories.every(
          (trajectory) =>
            trajectory.status === 'ok' &&
            trajectory.reward.total >= 0.9 &&
            trajectory.model.provider === 'scripted' &&
            trajectory.seed === seed,
        ),
      ).toBe(true);
      expect(new Set(trajectories.map((trajectory) => trajectory.id)).size).toBe(taskCount);
      expect(
        trajectories.some((trajectory) =>
          trajectory.messages.some((message) => message.role === 'assistant' && (message.tool_calls?.length ?? 0) >= 2),
        ),
      ).toBe(true);

      const stats = JSON.parse(await readFile(join(localDirectory, 'stats.json'), 'utf8')) as {
        totals: { acceptanceRate: number; calls: number };
        byCategory: Record<string, { tasks: number }>;
      };
      expect(stats.totals).toMatchObject({ acceptanceRate: 1 });
      expect(stats.totals.calls).toBeGreaterThan(taskCount);
      expect(Object.values(stats.byCategory).reduce((sum, category) => sum + category.tasks, 0)).toBe(taskCount);
      const report = await readFile(join(localDirectory, 'report.html'), 'utf8');
      expect(report).toContain('<svg');
      expect(report).toContain('coupon_math');

      // Through queues: the same tasks and seed, a worker in this process.
      await kit.startWorkers({ queues: ['collect', 'runs'], concurrency: 2 });
      const runConfig = join(directory, 'run.yaml');
      await writeFile(
        runConfig,
        `runId: collect-queued\nseed: ${seed}\nstages:\n  collect:\n    tasks: ${pathToFileURL(tasksFile).href}\n    tasksPerPart: 100\n    selection: { minReward: 0.9 }\n`,
      );
      const queued = await runHatInProcess(
        { ...environment, HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot },
        'run',
        runConfig,
        '--wait',
        '--json',
      );
      expect(queued.code).toBe(0);
      expect(JSON.parse(queued.stdout)).toMatchObject({ runId: 'collect-queued', state: 'completed' });
      const queuedText = await acceptedText(kit.artifactsDirectory, 'runs/collect-queued/collect/manifest.json');
      expect(sha256Hex(queuedText)).toBe(sha256Hex(text));
      // Each part job reported its progress in tasks.
      const partProgress = async () =>
        (await kit.context.queue('collect').getJobs(['completed']))
          .filter((job) => job.name === 'part')
          .map((job) => job.progress as { done?: number; total?: number });
      await waitFor(async () => (await partProgress()).filter((progress) => progress.done === 100).length === 5);
      expect(await partProgress()).toEqual(
        Array.from({ length: 5 }, () => expect.objectContaining({ done: 100, total: 100 })),
      );
      // The compressed objects too: byte-identical artifacts.
      const queuedObjects = await objectsOf(kit.artifactsDirectory, 'runs/collect-queued/collect/manifest.json');
      expect(queuedObjects.filter((object) => object.kind === 'trajectories').map((object) => object.sha256)).toEqual(
        objects.filter((object) => object.kind === 'trajectories').map((object) => object.sha256),
      );

      // Rerun in-process: finished parts are not redone; a part whose output is gone is redone alone, to the same bytes.
      const modified = async () =>
        Object.fromEntries(
          await Promise.all(
            [0, 1, 2, 3, 4].map(
              async (part) =>
                [part, (await stat(join(localDirectory, `part-0000${part}.accepted.jsonl.gz`))).mtimeMs] as const,
            ),
          ),
        );
      const before = await modified();
      await rm(join(localDirectory, 'part-00002.accepted.jsonl.gz'));
      await rm(join(localDirectory, '_state', 'part-00002.json'));
      const again = await runHatInProcess(
        environment,
        'stage',
        'collect',
        '--config',
        config,
        '--in',
        tasksFile,
        '--out',
        out,
        '--seed',
        seed,
        '--json',
      );
      expect(again.code).toBe(0);
      const after = await modified();
      expect([0, 1, 3, 4].map((part) => after[part])).toEqual([0, 1, 3, 4].map((part) => before[part]));
      expect(existsSync(join(localDirectory, 'part-00002.accepted.jsonl.gz'))).toBe(true);
      expect(sha256Hex(await acceptedText(localDirectory, 'manifest.json'))).toBe(sha256Hex(text));
    });
  });

  describe('bad input: exit 2 naming the file, line and field; nothing written', () => {
    const refused = async (configText: string, ...extra: string[]) => {
      const config = join(directory, `bad-${Math.random().toString(36).slice(2)}.yaml`);
      await writeFile(config, configText);
      const outDirectory = join(directory, `out-${Math.random().toString(36).slice(2)}`);
      const result = await runHatInProcess(
        environment,
        'stage',
        'collect',
        '--config',
        config,
        '--out',
        pathToFileURL(outDirectory).href,
        ...extra,
      );
      expect(result.code).toBe(2);
      expect(existsSync(outDirectory) ? await readdir(outDirectory) : []).toEqual([]);
      return result.stderr;
    };

    it('a missing task file', async () => {
      const missing = join(directory, 'nope.jsonl.gz');
      const stderr = await refused('{}\n', '--in', missing);
      expect(stderr).toContain(`[MISSING_INPUT] collect.inputs: ${pathToFileURL(missing).href} does not exist`);
    });

    it('a task line that is not JSON, and one with a bad field', async () => {
      const [first, second] = generateTasks({ count: 2, seed: 'bad-lines', world: { itemCount: 100 } });
      const notJson = join(directory, 'not-json.jsonl');
      await writeFile(notJson, `${JSON.stringify(first)}\n{"id": "cut off\n`);
      expect(await refused(`tasks: ${notJson}\n`)).toMatch(
        new RegExp(`\\[BAD_JSONL\\] ${pathToFileURL(notJson).href}: line 2: not valid JSON`),
      );

      const badField = join(directory, 'bad-field.jsonl');
      await writeFile(badField, `${JSON.stringify(first)}\n\n${JSON.stringify({ ...second, category: 'weather' })}\n`);
      const stderr = await refused(`tasks: ${badField}\n`);
      expect(stderr).toContain(`[BAD_RECORD] line 3 of ${pathToFileURL(badField).href} does not match its schema`);
      expect(stderr).toContain(`${pathToFileURL(badField).href}: line 3: category:`);

      const duplicate = join(directory, 'duplicate.jsonl');
      await writeFile(duplicate, `${JSON.stringify(first)}\n${JSON.stringify(first)}\n`);
      expect(await refused(`tasks: ${duplicate}\n`)).toContain(
        `[DUPLICATE_TASK_ID] ${pathToFileURL(duplicate).href}: record 2: id: task id "${first.id}" already appears`,
      );
    });

    it('a bad harness, a bad teacher config, a missing API key, no tasks at all', async () => {
      const harness = join(directory, 'broken-harness');
      await cp(sampleHarnessDirectory(), harness, { recursive: true });
      await writeFile(join(harness, 'tools', 'get_item_detail.json'), '{ "type": "function", ');
      const stderr = await refused(`generate: { count: 5, seed: 1 }\nharness: ${harness}\n`);
      expect(stderr).toContain('[BAD_HARNESS]');
      expect(stderr).toContain('get_item_detail.json');

      const teacher = await refused(
        'generate: { count: 5, seed: 1 }\nteacher: { adapter: openai, model: m, apiKey: sk-secret-in-config }\n',
      );
      expect(teacher).toContain('teacher.apiKey: secrets never go in config files');
      expect(teacher).toContain('teacher.baseUrl');
      expect(teacher).not.toContain('sk-secret-in-config');

      const noKey = await refused(
        'generate: { count: 5, seed: 1 }\nteacher: { adapter: openai, baseUrl: "http://127.0.0.1:9/v1", model: m, apiKeyEnv: HAT_COLLECT_TEST_UNSET_KEY }\n',
      );
      expect(noKey).toContain(
        '[MODEL_API_KEY_MISSING] collect.teacher.apiKeyEnv names the environment variable HAT_COLLECT_TEST_UNSET_KEY, which is not set',
      );

      expect(await refused('samplesPerTask: 2\n')).toContain('no tasks: give tasks');
    });
  });
});
