import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { runHatInProcess } from '../../test/support/hat-in-process';

const hat = (...argv: string[]) => runHatInProcess({}, ...argv);

async function readTasks(path: string): Promise<Task[]> {
  return gunzipSync(await readFile(path))
    .toString('utf8')
    .trim()
    .split('\n')
    .map((line) => taskSchema.parse(JSON.parse(line)));
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hat-cli-tasks-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('hat tasks generate', () => {
  it('writes byte-identical gzip JSONL for the same seed and reports counts', async () => {
    const first = join(scratch, 'a.jsonl.gz');
    const second = join(scratch, 'b.jsonl.gz');
    const result = await hat('tasks', 'generate', '--count', '40', '--seed', '9', '--items', '300', '--out', first);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/^wrote 40 tasks to file:\/\/.*a\.jsonl\.gz/);
    await hat('tasks', 'generate', '--count', '40', '--seed', '9', '--items', '300', '--out', `file://${second}`);
    expect(await readFile(second)).toEqual(await readFile(first));
    const tasks = await readTasks(first);
    expect(tasks).toHaveLength(40);
    expect(tasks).toEqual(generateTasks({ count: 40, seed: '9', world: { itemCount: 300 } }));
  });

  it('honours --weights and rejects bad options with exit 2', async () => {
    const out = join(scratch, 'traps.jsonl.gz');
    const json = await hat(
      'tasks',
      'generate',
      '--count',
      '12',
      '--seed',
      '1',
      '--items',
      '200',
      '--weights',
      'compliance_trap=1,price=0,spec=0,stock_size=0,coupon_math=0,shipping_after_sales=0,comparison=0,chit_chat=0,multi_question=0,multi_turn=0,out_of_catalog=0',
      '--out',
      out,
      '--json',
    );
    expect(JSON.parse(json.stdout).byCategory).toEqual({ compliance_trap: 12 });
    const badWeight = await hat(
      'tasks',
      'generate',
      '--count',
      '2',
      '--seed',
      '1',
      '--weights',
      'prices=1',
      '--out',
      out,
    );
    expect(badWeight.code).toBe(2);
    expect(badWeight.stderr).toContain('--weights entry "prices=1"');
    expect((await hat('tasks', 'generate', '--count', '0', '--seed', '1', '--out', out)).code).toBe(2);
  });

  it('writes production-like CJK-heavy tasks with --text cjk-heavy and refuses a text it does not know', async () => {
    const out = join(scratch, 'cjk.jsonl.gz');
    const written = await hat(
      ...'tasks generate --count 6 --seed 3 --items 200 --text cjk-heavy --out'.split(' '),
      out,
    );
    expect(written.code).toBe(0);
    expect(await readTasks(out)).toEqual(
      generateTasks({ count: 6, seed: '3', world: { itemCount: 200 }, text: 'cjk-heavy' }),
    );
    const unknown = await hat('tasks', 'generate', '--count', '2', '--seed', '1', '--text', 'chinese', '--out', out);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--text must be one of default, cjk-heavy, got "chinese"');
  });
});

describe('hat tasks import', () => {
  async function writeLogs(lines: string[]): Promise<string> {
    const path = join(scratch, `logs-${lines.length}.jsonl`);
    await writeFile(path, `${lines.join('\n')}\n`);
    return path;
  }

  it('imports good lines, skips and reports bad ones, and exits 2 with --on-bad-line fail', async () => {
    const room = generateTasks({ count: 1, seed: 'cli-logs', world: { itemCount: 100 } })[0].room;
    const entry = (message: string) =>
      JSON.stringify({ timestamp: '2025-06-18T12:00:00Z', room_id: room.roomId, room, viewer_message: message });
    const logs = await writeLogs([
      entry('这个多少钱？电话13812345678'),
      'oops',
      entry('主播晚上好'),
      entry('这个包邮吗'),
    ]);
    const out = join(scratch, 'imported.jsonl.gz');
    const result = await hat('tasks', 'import', logs, '--out', out);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('hat: skipped bad line: ');
    expect(result.stderr).toContain('line 2: not valid JSON');
    expect(result.stdout).toContain('read 4 lines: 3 tasks written to');
    expect(result.stdout).toContain('redacted: phone 1');
    expect(result.stdout).toContain('ignored fields (not in the log format, not copied into tasks): none');
    const tasks = await readTasks(out);
    expect(tasks.map((task) => task.category)).toEqual(['price', 'chit_chat', 'shipping_after_sales']);
    expect(tasks[0].turns[0].message).toBe('这个多少钱？电话[PHONE]');

    const failed = await hat(
      'tasks',
      'import',
      logs,
      '--out',
      join(scratch, 'never.jsonl.gz'),
      '--on-bad-line',
      'fail',
    );
    expect(failed.code).toBe(2);
    expect(failed.stderr).toMatch(/\[BAD_LOG_LINES\][\s\S]*line 2: not valid JSON/);
    await expect(readFile(join(scratch, 'never.jsonl.gz'))).rejects.toThrow();
    expect((await hat('tasks', 'import', logs, '--out', out, '--on-bad-line', 'maybe')).code).toBe(2);
  });

  it('names the fields of the log it did not copy into tasks (text and --json)', async () => {
    const room = generateTasks({ count: 1, seed: 'cli-logs', world: { itemCount: 100 } })[0].room;
    const logs = join(scratch, 'extra-fields.jsonl');
    await writeFile(
      logs,
      `${JSON.stringify({ timestamp: '2025-06-18T12:00:00Z', room_id: room.roomId, room, viewer_message: '这个多少钱', trace_id: 'a1' })}\n`,
    );
    const out = join(scratch, 'extra-fields.jsonl.gz');
    const text = await hat('tasks', 'import', logs, '--out', out);
    expect(text.stdout).toContain('ignored fields (not in the log format, not copied into tasks): trace_id 1 line');
    const json = await hat('tasks', 'import', logs, '--out', out, '--json');
    expect(JSON.parse(json.stdout).ignoredFields).toEqual({ trace_id: 1 });
  });

  it('refuses a log with a byte that is not UTF-8 ([BAD_ENCODING], file, line, byte offset) in either mode and writes nothing', async () => {
    const room = generateTasks({ count: 1, seed: 'cli-logs', world: { itemCount: 100 } })[0].room;
    const entry = (message: string) =>
      JSON.stringify({ timestamp: '2025-06-18T12:00:00Z', room_id: room.roomId, room, viewer_message: message });
    const first = Buffer.from(`${entry('这个多少钱')}\n`);
    // A GBK-encoded message in a UTF-8 log: 0xd5 0xe2 is 这 in GBK, not UTF-8.
    const second = Buffer.concat([Buffer.from('{"viewer_message": "'), Buffer.from([0xd5, 0xe2]), Buffer.from('"}\n')]);
    const logs = join(scratch, 'gbk.jsonl');
    await writeFile(logs, Buffer.concat([first, second]));
    for (const mode of ['skip', 'fail']) {
      const out = join(scratch, `gbk-${mode}.jsonl.gz`);
      const result = await hat('tasks', 'import', logs, '--out', out, '--on-bad-line', mode);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(
        `[BAD_ENCODING] file://${logs}: line 2: byte 21 of the line (byte offset ${first.length + 20} of the file) is not valid UTF-8`,
      );
      await expect(readFile(out)).rejects.toThrow();
    }
  });

  it('refuses a log line longer than HAT_MAX_RECORD_BYTES, naming the file, line and setting, and writes nothing', async () => {
    const logs = join(scratch, 'long.jsonl');
    await writeFile(logs, `{"viewer_message": "short"}\n{"viewer_message": "${'x'.repeat(5000)}"}\n`);
    const out = join(scratch, 'long.jsonl.gz');
    const result = await runHatInProcess({ HAT_MAX_RECORD_BYTES: '4096' }, 'tasks', 'import', logs, '--out', out);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `[RECORD_TOO_LARGE] file://${logs}: line 2 is longer than the largest record size, 4096 bytes (HAT_MAX_RECORD_BYTES)`,
    );
    await expect(readFile(out)).rejects.toThrow();
  });
});

describe('hat tasks expert-report', () => {
  it('prints the scripted expert reward distribution by category', async () => {
    const result = await hat('tasks', 'expert-report', '--count', '30', '--seed', 'r', '--items', '300', '--json');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report).toMatchObject({ count: 30, seed: 'r', harness: { id: 'live-host' }, notOk: 0 });
    expect(report.overall.shareAtLeast095).toBeGreaterThanOrEqual(0.95);
    const text = await hat('tasks', 'expert-report', '--count', '30', '--seed', 'r', '--items', '300');
    expect(text.stdout).toMatch(/^scripted expert on 30 tasks/);
    expect(text.stdout).toMatch(/ {2}all\s+30\s+\d\.\d{3}/);
  });
});
