import { gzipSync } from 'node:zlib';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { preflightRunConfig } from './run-preflight';

/** The preflight on task sets in a bucket (s3://), which it reads only as far as the first task. */
describe('preflightRunConfig and task files in S3', () => {
  const store = new MemoryArtifactStore('bucket');
  const openObject = (uri: string) => ({ store, key: uri.replace(/^s3:\/\/bucket\//, '') });
  const preflight = (tasks: string) =>
    preflightRunConfig(
      { stages: { collect: { tasks } } },
      { openObject, environment: {}, checkEndpoints: false, cwd: '/nowhere' },
    );

  it('refuses an empty task file (plain or gzip) before anything is enqueued, naming the field and code', async () => {
    await store.put('tasks/empty.jsonl', '');
    await store.put('tasks/empty.jsonl.gz', gzipSync(Buffer.alloc(0)));
    for (const key of ['tasks/empty.jsonl', 'tasks/empty.jsonl.gz']) {
      const { problems } = await preflight(`s3://bucket/${key}`);
      expect(problems).toEqual([
        {
          path: ['stages', 'collect', 'tasks'],
          message: expect.stringMatching(/^\[NO_TASKS\] s3:\/\/bucket\/tasks\/empty\.jsonl(\.gz)? holds no tasks/),
        },
      ]);
    }
  });

  it('refuses a first task that is not UTF-8 or has a field tasks do not have, and accepts a good set', async () => {
    const [task] = generateTasks({ count: 1, seed: 's3-preflight', world: { itemCount: 50 } });
    const line = Buffer.from(JSON.stringify(task));
    await store.put(
      'tasks/latin1.jsonl',
      Buffer.concat([line.subarray(0, 20), Buffer.from([0xe9]), line.subarray(20)]),
    );
    expect((await preflight('s3://bucket/tasks/latin1.jsonl')).problems[0]?.message).toMatch(
      /^\[BAD_ENCODING\] memory:\/\/bucket\/tasks\/latin1\.jsonl: line 1: byte 21 of the line/,
    );
    await store.put('tasks/unknown.jsonl', `${JSON.stringify({ ...task, turn: task!.turns })}\n`);
    expect((await preflight('s3://bucket/tasks/unknown.jsonl')).problems[0]?.message).toMatch(
      /^\[UNKNOWN_FIELD\] [\s\S]*line 1: turn: not a field of this record/,
    );
    await writeJsonl(store, 'tasks/good.jsonl.gz', generateTasks({ count: 3, seed: 's3-preflight' }));
    expect(await preflight('s3://bucket/tasks/good.jsonl.gz')).toEqual({ problems: [], notes: [] });
  });
});
