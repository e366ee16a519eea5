import { gzipSync } from 'node:zlib';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { sha256Hex } from '../../shared/hash/hash';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { readWantedTasks } from './task-lookup';

describe('readWantedTasks', () => {
  const tasks = generateTasks({ count: 9, seed: 'task-lookup' });
  const store = new MemoryArtifactStore('lookup');
  const openObject = (uri: string) => ({ store, key: store.keyOf(uri) });

  it('finds the wanted tasks, lists every object with its sha256, and reads only objects holding wanted tasks once indexed', async () => {
    const first = await writeJsonl(store, 'a/tasks-0.jsonl.gz', tasks.slice(0, 3));
    const second = await writeJsonl(store, 'a/tasks-1.jsonl.gz', tasks.slice(3, 6));
    // The same id in a later object wins, as a whole read does.
    const changed = {
      ...tasks[0]!,
      category: tasks[8]!.category === tasks[0]!.category ? 'other' : tasks[8]!.category,
    };
    const third = await writeJsonl(store, 'a/tasks-2.jsonl.gz', [...tasks.slice(6, 9), changed]);
    const objects = [first, second, third].map((info) => ({
      uri: info.uri,
      records: info.records,
      sha256: info.sha256,
    }));
    const lineage = [first, second, third].map((info) => ({ uri: info.uri, sha256: info.sha256 }));
    const wanted = new Set([tasks[0]!.id, tasks[4]!.id, 'absent']);

    const cold = await readWantedTasks(objects, openObject, wanted);
    expect([...cold.records.keys()].sort()).toEqual([tasks[0]!.id, tasks[4]!.id].sort());
    expect(cold.records.get(tasks[4]!.id)).toEqual(tasks[4]);
    expect(cold.records.get(tasks[0]!.id)).toEqual(changed);
    expect(cold.objects).toEqual(lineage);

    const reads = jest.spyOn(store, 'getBuffer');
    const warm = await readWantedTasks(objects, openObject, new Set([tasks[4]!.id]));
    expect(reads.mock.calls.map(([key]) => key)).toEqual(['a/tasks-1.jsonl.gz']);
    expect(warm.records).toEqual(new Map([[tasks[4]!.id, tasks[4]]]));
    expect(warm.objects).toEqual(lineage);
    reads.mockRestore();
  });

  it('names the object and line of a bad task record, and reads objects without a listed sha256 whole', async () => {
    const bad = Buffer.from(`${JSON.stringify(tasks[0])}\n${JSON.stringify({ id: 'x' })}\n`);
    const info = await store.put('b/bad.jsonl.gz', gzipSync(bad));
    // The manifest listed other bytes (the object was rewritten since): every wanted task is checked.
    await expect(
      readWantedTasks([{ uri: info.uri, sha256: sha256Hex('other bytes') }], openObject, new Set(['x'])),
    ).rejects.toThrow(/b\/bad\.jsonl\.gz.*line 2/);
    // Bytes the manifest lists were written through the task schema by the stage: parsed, not checked again.
    const vouched = await readWantedTasks([{ uri: info.uri, sha256: info.sha256! }], openObject, new Set(['x']));
    expect(vouched.records.get('x')).toEqual({ id: 'x' });
    const broken = gzipSync(Buffer.from(`${JSON.stringify(tasks[0])}\nnot json\n`));
    const brokenInfo = await store.put('b/broken.jsonl.gz', broken);
    await expect(
      readWantedTasks([{ uri: brokenInfo.uri, sha256: sha256Hex(broken) }], openObject, new Set([tasks[0]!.id])),
    ).rejects.toThrow(/b\/broken\.jsonl\.gz: line 2: not valid JSON/);
    const plain = await writeJsonl(store, 'b/plain.jsonl.gz', tasks.slice(0, 2));
    const direct = await readWantedTasks([{ uri: plain.uri }], openObject, new Set([tasks[1]!.id]));
    expect(direct.records).toEqual(new Map([[tasks[1]!.id, tasks[1]]]));
    expect(direct.objects).toEqual([{ uri: plain.uri, sha256: plain.sha256 }]);
  });

  it('reads ids from any key order, escaped ids and CRLF lines, and does not take a nested id for the task id', async () => {
    const [first, second, third, fourth] = tasks;
    const reordered = {
      category: first!.category,
      room: first!.room,
      turns: first!.turns,
      source: first!.source,
      schemaVersion: first!.schemaVersion,
      id: first!.id,
    };
    const escaped = { ...second!, id: 'quote"d\\id' };
    // An "id" key inside an earlier value must not be read as the task's id.
    const { room: thirdRoom, schemaVersion: thirdVersion, ...thirdRest } = third!;
    const [firstItem, ...otherItems] = thirdRoom.items;
    const nested = {
      schemaVersion: thirdVersion,
      // An item's specs hold any keys: an "id" there is the task's data, ahead of the task's own id.
      room: {
        ...thirdRoom,
        items: [{ ...firstItem!, specs: { id: 'not-the-task', ...firstItem!.specs } }, ...otherItems],
      },
      ...thirdRest,
    };
    const text =
      [reordered, escaped, nested].map((task) => JSON.stringify(task)).join('\r\n') + `\n${JSON.stringify(fourth)}\n`;
    const bytes = gzipSync(Buffer.from(text));
    const info = await store.put('c/orders.jsonl.gz', bytes);
    // Listed for other bytes, so the tasks are checked.
    const objects = [{ uri: info.uri, sha256: sha256Hex('listed for other bytes') }];
    const wanted = new Set([first!.id, escaped.id, third!.id, fourth!.id]);
    const cold = await readWantedTasks(objects, openObject, wanted);
    expect([...cold.records.keys()].sort()).toEqual([...wanted].sort());
    expect(cold.records.get(escaped.id)?.id).toBe(escaped.id);
    expect(cold.records.get(third!.id)?.room.items[0]?.specs.id).toBe('not-the-task');
    const warm = await readWantedTasks(objects, openObject, new Set([escaped.id, fourth!.id, 'not-the-task']));
    expect([...warm.records.keys()].sort()).toEqual([escaped.id, fourth!.id].sort());
    expect(warm.records.get(fourth!.id)).toEqual(fourth);
  });
});
