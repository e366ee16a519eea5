import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../errors';
import type { Harness } from '../harness/harness-types';
import { loadHarness } from '../harness/load-harness';
import { sampleHarnessDirectory } from '../harness/sample-harness';
import { runEpisode } from './agent-loop';
import { importProductionLogs, type ProductionLogLine } from './log-import';
import { ScriptedExpert } from './policies/scripted-expert';
import { generateTasks } from './tasks/generate-tasks';
import { taskSchema } from './tasks/task-schema';
import type { RoomSnapshot } from './world/room-snapshot';

let harness: Harness;
let room: RoomSnapshot;

beforeAll(async () => {
  harness = await loadHarness(sampleHarnessDirectory());
  // A logged room: take a generated task's room whose featured item is apparel.
  room = generateTasks({ count: 200, seed: 'logs', world: { itemCount: 600 } }).find((task) => {
    const featured = task.room.items.find((item) => item.itemId === task.room.featuredItemId);
    return featured?.category === 'apparel' && task.room.links.length >= 4;
  })!.room;
});

function line(message: string, extra: Partial<ProductionLogLine> = {}): string {
  return JSON.stringify({
    timestamp: '2025-06-18T20:01:02+08:00',
    room_id: room.roomId,
    room,
    viewer_message: message,
    viewer_id: 'u-991',
    ...extra,
  });
}

describe('importProductionLogs', () => {
  it('redacts, classifies and builds tasks the expert can solve', async () => {
    const lines = [
      line('我叫王小明，电话13812345678，这个多少钱', {
        agent_reply: '王小明你好，到手价见购物车，有问题打13812345678',
      }),
      line('3号链接包邮吗'),
      line('身高165体重110斤穿什么码'),
      line('这个买2件到手多少'),
      line('主播是真人吗'),
      line('有没有戴森吹风机'),
      line('这个是不是全网最便宜'),
      line('这个多少钱，包邮吗'),
    ];
    const { tasks, report } = await importProductionLogs(lines, { file: 'prod.jsonl' });
    expect(tasks.map((task) => task.category)).toEqual([
      'price',
      'shipping_after_sales',
      'stock_size',
      'coupon_math',
      'chit_chat',
      'out_of_catalog',
      'compliance_trap',
      'multi_question',
    ]);
    expect(report).toMatchObject({ lines: 8, duplicates: 0, unclassified: [], badLines: [] });
    expect(report.redactions).toEqual({ name: 1, phone: 2 });
    const first = tasks[0];
    expect(first.turns[0].message).toBe('我叫[NAME]，电话[PHONE]，这个多少钱');
    expect(first.source).toMatchObject({
      kind: 'production_log',
      file: 'prod.jsonl',
      line: 1,
      roomId: room.roomId,
      referenceReply: '王小明你好，到手价见购物车，有问题打[PHONE]',
    });
    expect(JSON.stringify(tasks)).not.toContain('13812345678');
    expect(JSON.stringify(tasks)).not.toContain('u-991');
    const size = tasks[2].turns[0].intent;
    expect(size).toMatchObject({ kind: 'size', heightCm: 165, weightKg: 55, weightUnit: 'jin' });
    for (const task of tasks) expect(taskSchema.parse(task)).toEqual(task);
    const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
    for (const task of tasks)
      expect((await runEpisode({ policy: expert, harness, task })).reward.total).toBeGreaterThanOrEqual(0.95);
  });

  it('reports bad lines with their numbers, drops duplicates and unreadable messages', async () => {
    const lines = [
      line('这个多少钱'),
      '{not json',
      JSON.stringify({ timestamp: 'yesterday', room_id: room.roomId, room, viewer_message: 'hi' }),
      line('这个多少钱'),
      '',
      line('今天天气不错', {}),
      line('这个多少钱', { room_id: 'other-room' }),
    ];
    const { tasks, report } = await importProductionLogs(lines, { file: 'prod.jsonl' });
    expect(tasks).toHaveLength(1);
    expect(report.duplicates).toBe(1);
    expect(report.unclassified).toEqual([6]);
    expect(report.badLines).toEqual([
      { file: 'prod.jsonl', line: 2, message: expect.stringMatching(/^not valid JSON/) },
      { file: 'prod.jsonl', line: 3, path: 'timestamp', message: 'must be an ISO 8601 timestamp' },
      { file: 'prod.jsonl', line: 7, message: `room_id other-room differs from room.roomId ${room.roomId}` },
    ]);
    await expect(importProductionLogs(lines, { file: 'prod.jsonl', onBadLine: 'fail' })).rejects.toThrow(
      ValidationError,
    );
    await expect(importProductionLogs(lines, { file: 'prod.jsonl', onBadLine: 'fail' })).rejects.toThrow(
      /prod\.jsonl: line 2: not valid JSON[\s\S]*prod\.jsonl: line 3: timestamp/,
    );
  });

  it('names every field of the lines it did not carry into tasks, with how many lines had it', async () => {
    const items = room.items.map((item) => ({ ...item, colour: 'red' }));
    const lines = [
      line('这个多少钱', { trace_id: 't-1' } as Partial<ProductionLogLine>),
      line('这个包邮吗', { trace_id: 't-2', room: { ...room, items } } as Partial<ProductionLogLine>),
      line('主播晚上好'),
    ];
    const { tasks, report } = await importProductionLogs(lines, { file: 'prod.jsonl' });
    expect(tasks).toHaveLength(3);
    expect(report.ignoredFields).toEqual({ trace_id: 2, 'room.items[].colour': 1 });
    expect(JSON.stringify(tasks)).not.toContain('colour');
  });

  it('samples at most N tasks per category, deterministically by seed', async () => {
    const questions = [
      '这个多少钱',
      '这个怎么卖',
      '这个什么价',
      '1号多少钱',
      '2号多少钱',
      '这个包邮吗',
      '这个要运费吗',
      '主播好漂亮',
      '主播声音好听',
    ];
    const lines = questions.map((question) => line(question));
    const first = await importProductionLogs(lines, { perCategory: 2, seed: 'a' });
    expect(first.report.classified).toEqual({ price: 5, shipping_after_sales: 2, chit_chat: 2 });
    expect(first.report.imported).toEqual({ price: 2, shipping_after_sales: 2, chit_chat: 2 });
    expect((await importProductionLogs(lines, { perCategory: 2, seed: 'a' })).tasks).toEqual(first.tasks);
    // Kept in log order.
    const lineNumbers = first.tasks.map((task) => (task.source.kind === 'production_log' ? task.source.line : 0));
    expect(lineNumbers).toEqual([...lineNumbers].sort((a, b) => a - b));
  });
});

describe('LOG_FORMAT.md', () => {
  it('documents an example line that imports as a task', async () => {
    const doc = readFileSync(join(__dirname, 'LOG_FORMAT.md'), 'utf8');
    const example = /```json\n([\s\S]*?)\n```/.exec(doc)![1];
    const { tasks, report } = await importProductionLogs([JSON.stringify(JSON.parse(example))], { onBadLine: 'fail' });
    expect(report.badLines).toEqual([]);
    expect(tasks.map((task) => task.category)).toEqual(['price']);
  });
});
