import { gzipSync } from 'node:zlib';
import { openArtifactObject } from '../shared/artifacts/create-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema, type Task } from '../shared/simulator/tasks/task-schema';
import { runHatInProcess } from './support/hat-in-process';
import { useLocalS3Server } from './support/s3-server';

const s3 = useLocalS3Server();

const hat = runHatInProcess;

async function readTasks(uri: string): Promise<Task[]> {
  const { store, key } = openArtifactObject(uri, s3.env);
  const tasks: Task[] = [];
  for await (const task of readJsonl(store, key, { schema: taskSchema })) tasks.push(task);
  await store.close();
  return tasks;
}

describe('hat tasks against an S3-compatible store', () => {
  it('generates tasks to an s3:// URI', async () => {
    const uri = `${s3.freshUri()}/tasks/generated.jsonl.gz`;
    const result = await hat(
      s3.env,
      'tasks',
      'generate',
      '--count',
      '25',
      '--seed',
      's3',
      '--items',
      '300',
      '--out',
      uri,
      '--json',
    );
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ uri, records: 25 });
    expect(await readTasks(uri)).toEqual(generateTasks({ count: 25, seed: 's3', world: { itemCount: 300 } }));
  });

  it('imports gzip logs from an s3:// URI', async () => {
    const root = s3.freshUri();
    const room = generateTasks({ count: 1, seed: 's3-logs', world: { itemCount: 100 } })[0].room;
    const lines = ['这个多少钱', '这个包邮吗', '收件人张三 13900001111 这个能开发票吗'].map((message) =>
      JSON.stringify({ timestamp: '2025-06-18T12:00:00Z', room_id: room.roomId, room, viewer_message: message }),
    );
    const { store, key } = openArtifactObject(`${root}/logs/day.jsonl.gz`, s3.env);
    await store.put(key, gzipSync(`${lines.join('\n')}\n`));
    await store.close();
    const out = `${root}/tasks/imported.jsonl.gz`;
    const result = await hat(s3.env, 'tasks', 'import', `${root}/logs/day.jsonl.gz`, '--out', out);
    expect(result.code).toBe(0);
    const tasks = await readTasks(out);
    expect(tasks.map((task) => task.category)).toEqual(['price', 'shipping_after_sales', 'shipping_after_sales']);
    expect(tasks[2].turns[0].message).toBe('收件人[NAME] [PHONE] 这个能开发票吗');
  });
});
