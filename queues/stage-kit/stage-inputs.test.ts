import { gzipSync } from 'node:zlib';
import { z } from 'zod';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { setLargestRecordBytes, defaultLargestRecordBytes } from '../../shared/artifacts/record-limit';
import { errorCodeOf } from '../../shared/errors';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { PythonFloat, pythonJson } from '../../shared/text/python-values';
import { toolSpecSchema } from '../../shared/trajectory/messages';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { taskSchema } from '../../shared/simulator/tasks/task-schema';
import { trajectorySchema } from '../../shared/trajectory/trajectory';
import { syntheticSessions } from '../../workers/replay/testing/synthetic-sessions';
import { readRecordRange } from './stage-inputs';

const schema = z.object({ id: z.string(), count: z.number().int().default(0) });

describe('readRecordRange', () => {
  const store = new MemoryArtifactStore('inputs');
  const openObject = (uri: string) => ({ store, key: store.keyOf(uri) });

  it('checks every record of an object no manifest vouches for, naming the line and field', async () => {
    const written = await writeJsonl(store, 'bad.jsonl.gz', [{ id: 'a' }, { id: 7 }]);
    await expect(readRecordRange(openObject, written.uri, schema)).rejects.toThrow(/line 2.*id/s);
    // A manifest's sha256 for other bytes vouches for nothing: still checked.
    await expect(readRecordRange(openObject, written.uri, schema, 0, undefined, 'f'.repeat(64))).rejects.toThrow(
      /line 2.*id/s,
    );
  });

  it('parses without checking the bytes a manifest lists, which a stage wrote through the schema', async () => {
    const written = await writeJsonl(store, 'good.jsonl.gz', [{ id: 'a' }, { id: 'b', count: 2 }], { schema });
    const checked = await readRecordRange(openObject, written.uri, schema);
    const listed = await readRecordRange(openObject, written.uri, schema, 0, undefined, written.sha256);
    // The writer stored the schema's own output (defaults filled), so both reads give the same records.
    expect(listed).toEqual(checked);
    expect(listed.records).toEqual([
      { id: 'a', count: 0 },
      { id: 'b', count: 2 },
    ]);
    expect((await readRecordRange(openObject, written.uri, schema, 1, 2, written.sha256)).records).toEqual([
      { id: 'b', count: 2 },
    ]);
  });

  it('keeps float-ness in the fields a stage renders (tools), so a schema\'s "minimum": 1.0 prints 1.0 as Python does', async () => {
    const tools =
      '[{"type":"function","function":{"name":"count","parameters":{"type":"object","properties":' +
      '{"n":{"type":"number","minimum":1.0,"maximum":1e16,"default":2}}}}}]';
    const line = `{"id":"t1","messages":[{"role":"user","content":"1.0?"}],"tools":${tools},"score":1.0}`;
    await store.put('floats.jsonl', Buffer.from(`${line}\n`));
    const uri = store.uriOf('floats.jsonl');
    const plain = await readRecordRange(openObject, uri, z.object({ tools: z.array(z.unknown()) }).loose());
    expect(pythonJson(plain.records[0].tools)).toContain('"minimum": 1,');
    const kept = await readRecordRange(
      openObject,
      uri,
      z.object({ tools: z.array(z.unknown()) }).loose(),
      0,
      undefined,
      undefined,
      {
        keepFloatsIn: ['tools'],
      },
    );
    expect(pythonJson(kept.records[0].tools)).toContain('"minimum": 1.0, "maximum": 1e+16, "default": 2}');
    // Only the named fields: the rest of the record is JSON.parse's.
    expect((kept.records[0] as Record<string, unknown>).score).toBe(1);
    // Through the trajectories' tool schema too (its parameters are any JSON).
    const [tool] = z.array(toolSpecSchema).parse(kept.records[0].tools);
    expect((tool.function.parameters.properties as { n: { minimum: unknown } }).n.minimum).toEqual(new PythonFloat(1));
  });

  it('refuses a task, relabel or part file that is not UTF-8 with its line and byte offset (was read with U+FFFD)', async () => {
    const latin1 = Buffer.concat([Buffer.from('{"id":"a"}\n{"id":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]);
    await store.put('latin1.jsonl.gz', gzipSync(latin1));
    const error = await readRecordRange(openObject, store.uriOf('latin1.jsonl.gz'), schema).then(
      () => undefined,
      (failure: unknown) => failure as Error,
    );
    expect(errorCodeOf(error)).toBe('BAD_ENCODING');
    expect(error?.message).toContain(
      `${store.uriOf('latin1.jsonl.gz')}: line 2: byte 11 of the line (byte offset 21 of the file) is not valid UTF-8`,
    );
  });

  it('refuses a task with a field the task schema does not declare, naming the file, line and field path (was dropped)', async () => {
    const [task] = generateTasks({ count: 1, seed: 'unknown-fields', world: { itemCount: 50 } });
    const extra = { ...task, notes: 'x'.repeat(1000), room: { ...task.room, colour: 'red' } };
    await store.put('unknown.jsonl', Buffer.from(`${JSON.stringify(task)}\n${JSON.stringify(extra)}\n`));
    const uri = store.uriOf('unknown.jsonl');
    for (const listed of [undefined, 'f'.repeat(64)]) {
      const error = await readRecordRange(openObject, uri, taskSchema, 0, undefined, listed).then(
        () => undefined,
        (failure: unknown) => failure as Error,
      );
      expect(errorCodeOf(error)).toBe('UNKNOWN_FIELD');
      expect(error?.message).toContain(`${uri}: line 2: notes: not a field of this record`);
      expect(error?.message).toContain(`${uri}: line 2: room.colour: not a field of this record`);
    }
    // Fields inside array elements are named with their index.
    const items = task.room.items.map((item, index) => (index === 1 ? { ...item, colour: 'red' } : item));
    await store.put('nested.jsonl', Buffer.from(`${JSON.stringify({ ...task, room: { ...task.room, items } })}\n`));
    await expect(readRecordRange(openObject, store.uriOf('nested.jsonl'), taskSchema)).rejects.toThrow(
      'line 1: room.items[1].colour: not a field of this record',
    );
  });

  it("keeps what a schema declares open as written: a trajectory's meta keeps keys of its own", async () => {
    const [session] = syntheticSessions({ count: 1 });
    const trajectory = { ...session, meta: { ...session.meta, importedFrom: { system: 'crm', batch: 7 } } };
    await store.put('open.jsonl', Buffer.from(`${JSON.stringify(trajectory)}\n`));
    const { records } = await readRecordRange(openObject, store.uriOf('open.jsonl'), trajectorySchema);
    expect(records[0].meta).toEqual(trajectory.meta);
    await store.put('closed.jsonl', Buffer.from(`${JSON.stringify({ ...trajectory, source: 'crm' })}\n`));
    await expect(readRecordRange(openObject, store.uriOf('closed.jsonl'), trajectorySchema)).rejects.toThrow(
      /^\[UNKNOWN_FIELD\] [\s\S]*line 1: source: not a field of this record/,
    );
  });

  it('refuses a line longer than the largest record size, naming the file, the line and the setting', async () => {
    await store.put('long.jsonl', Buffer.from(`{"id":"a"}\n{"id":"${'x'.repeat(200)}"}\n`));
    setLargestRecordBytes(100);
    try {
      await expect(readRecordRange(openObject, store.uriOf('long.jsonl'), schema)).rejects.toThrow(
        `[RECORD_TOO_LARGE] ${store.uriOf('long.jsonl')}: line 2 is longer than the largest record size, 100 bytes (HAT_MAX_RECORD_BYTES)`,
      );
    } finally {
      setLargestRecordBytes(defaultLargestRecordBytes);
    }
    expect((await readRecordRange(openObject, store.uriOf('long.jsonl'), schema)).records).toHaveLength(2);
  });

  it('refuses a task line over 16 MiB by default (a 17 MiB field was read and dropped)', async () => {
    const [task] = generateTasks({ count: 1, seed: 'huge', world: { itemCount: 50 } });
    await store.put('huge.jsonl', Buffer.from(`${JSON.stringify({ ...task, blob: 'x'.repeat(17 * 1024 * 1024) })}\n`));
    await expect(readRecordRange(openObject, store.uriOf('huge.jsonl'), taskSchema)).rejects.toThrow(
      `[RECORD_TOO_LARGE] ${store.uriOf('huge.jsonl')}: line 1 is longer than the largest record size, 16777216 bytes (HAT_MAX_RECORD_BYTES)`,
    );
  });
});
