import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ScheduleInfo } from '../queues/runs/job-scheduler';
import { runHat } from './support/hat-process';
import { createQueueTestKit, type QueueTestKit } from './support/queue-test-kit';

/** `hat schedule set | list | remove` (spawned CLI) over BullMQ job schedulers. */
describe('hat schedule (spawned CLI)', () => {
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;
  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-schedule-'));
    env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'warn' };
  });
  afterEach(async () => {
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  it('sets a cron schedule in a time zone, lists it with its next firing, and removes it', async () => {
    const config = join(directory, 'nightly.yaml');
    await writeFile(config, 'stages:\n  fanout-demo: { parts: 4 }\n');
    const set = await runHat(
      ['schedule', 'set', 'nightly', '--cron', '30 2 * * *', '--tz', 'Asia/Kolkata', '--config', config, '--json'],
      env,
    );
    expect(set.stderr).toBe('');
    expect(set.code).toBe(0);
    const created = JSON.parse(set.stdout) as ScheduleInfo;
    expect(created).toMatchObject({
      name: 'nightly',
      cron: '30 2 * * *',
      tz: 'Asia/Kolkata',
      configFile: config,
      stages: ['fanout-demo'],
    });
    // 02:30 in Kolkata (UTC+05:30, no daylight saving) is 21:00 UTC the day before.
    expect(created.next).toMatch(/T21:00:00\.000Z$/);
    expect(Date.parse(created.next ?? '')).toBeGreaterThan(Date.now());

    // Setting it again replaces it (one scheduler, new pattern).
    expect(
      (await runHat(['schedule', 'set', 'nightly', '--cron', '0 3 * * 1', '--tz', 'UTC', '--config', config], env))
        .code,
    ).toBe(0);
    const listed = await runHat(['schedule', 'list', '--json'], env);
    const schedules = JSON.parse(listed.stdout) as ScheduleInfo[];
    expect(schedules).toHaveLength(1);
    expect(schedules[0]).toMatchObject({ name: 'nightly', cron: '0 3 * * 1', tz: 'UTC' });
    expect(new Date(schedules[0]?.next ?? '').getUTCDay()).toBe(1);

    const removed = await runHat(['schedule', 'remove', 'nightly'], env);
    expect(removed.code).toBe(0);
    expect(JSON.parse((await runHat(['schedule', 'list', '--json'], env)).stdout)).toEqual([]);
    const again = await runHat(['schedule', 'remove', 'nightly'], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('[SCHEDULE_NOT_FOUND] no schedule named "nightly"');
  });

  it('refuses a bad time zone, a bad cron pattern and an invalid run config with exit 2, scheduling nothing', async () => {
    const good = join(directory, 'good.yaml');
    await writeFile(good, 'stages:\n  noop: {}\n');
    const badConfig = join(directory, 'bad.yaml');
    await writeFile(badConfig, 'stages:\n  noop: { label: 5 }\n');

    const zone = await runHat(
      ['schedule', 'set', 'x', '--cron', '0 2 * * *', '--tz', 'Mars/Olympus', '--config', good],
      env,
    );
    expect(zone.code).toBe(2);
    expect(zone.stderr).toContain('[BAD_TIMEZONE]');
    const cron = await runHat(['schedule', 'set', 'x', '--cron', 'every night', '--tz', 'UTC', '--config', good], env);
    expect(cron.code).toBe(2);
    expect(cron.stderr).toContain('[BAD_CRON] --cron "every night" was refused');
    const config = await runHat(
      ['schedule', 'set', 'x', '--cron', '0 2 * * *', '--tz', 'UTC', '--config', badConfig],
      env,
    );
    expect(config.code).toBe(2);
    expect(config.stderr).toContain(`${badConfig}: line 2: stages.noop.label:`);
    expect(await kit.context.runsQueue.getJobSchedulersCount()).toBe(0);
  });
});
