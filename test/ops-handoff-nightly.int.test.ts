import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeJsonl } from '../shared/artifacts/jsonl-writer';
import { readManifest } from '../shared/artifacts/manifest';
import { readHarnessFiles, writeHarnessFiles } from '../shared/harness/harness-files';
import { sampleHarnessDirectory } from '../shared/harness/sample-harness';
import { generateTasks } from '../shared/simulator/tasks/generate-tasks';
import { taskSchema } from '../shared/simulator/tasks/task-schema';
import { compactUtc } from '../queues/stage-kit/job-ids';
import type { ScheduleInfo } from '../queues/runs/job-scheduler';
import { scheduledAtOf } from '../queues/runs/job-scheduler';
import { getRunStatus } from '../queues/runs/run-control';
import { runManifestSchema } from '../workers/run/run-manifest';
import { runHatInProcess } from './support/hat-in-process';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';

/**
 * Nightly runs: a schedule in a time zone whose firings resolve `latest` inputs (the newest
 * complete task partition, the harness version CURRENT names) when they run, not when the
 * schedule was set, and record what they resolved in the run manifest.
 */
describe('nightly schedule with latest inputs', () => {
  let kit: QueueTestKit;
  let directory: string;
  let env: Record<string, string>;

  beforeEach(async () => {
    kit = await createQueueTestKit();
    directory = await mkdtemp(join(tmpdir(), 'hat-nightly-'));
    env = { HAT_REDIS_PREFIX: kit.prefix, HAT_ARTIFACTS: kit.artifactsRoot, HAT_LOG_LEVEL: 'silent' };
  });
  afterEach(async () => {
    await kit.cleanup();
    await rm(directory, { recursive: true, force: true });
  });

  const hat = (...argv: string[]) => runHatInProcess(env, ...argv);
  const partition = async (day: string, seed: string, complete: boolean) => {
    await writeJsonl(kit.store, `inputs/tasks/dt=${day}/tasks.jsonl.gz`, generateTasks({ count: 3, seed }), {
      schema: taskSchema,
    });
    if (complete) await kit.store.put(`inputs/tasks/dt=${day}/_SUCCESS`, '');
  };
  const harnessVersion = async (version: string) =>
    writeHarnessFiles(
      await readHarnessFiles(sampleHarnessDirectory()),
      join(kit.artifactsDirectory, 'inputs', 'harness', version),
    );

  it('resolves the newest complete partition and the CURRENT harness when the firing runs, and records them', async () => {
    await partition('2025-01-28', 'day-28', true);
    await harnessVersion('v1');
    await kit.store.put('inputs/harness/CURRENT', 'v1\n');
    const config = join(directory, 'nightly.yaml');
    await writeFile(
      config,
      [
        'seed: nightly-test',
        'stages:',
        '  collect:',
        `    tasks: { latest: "${kit.artifactsRoot}/inputs/tasks/", partition: "dt=YYYY-MM-DD", file: tasks.jsonl.gz, marker: _SUCCESS }`,
        `    harness: { latestHarness: "${kit.artifactsRoot}/inputs/harness/" }`,
        '    tasksPerPart: 2',
        '',
      ].join('\n'),
    );
    const set = await hat(
      'schedule',
      'set',
      'nightly',
      '--cron',
      '0 2 * * *',
      '--tz',
      'Asia/Shanghai',
      '--config',
      config,
      '--json',
    );
    expect(set.code).toBe(0);
    // 02:00 in Shanghai (UTC+8) is 18:00 UTC the day before.
    expect((JSON.parse(set.stdout) as ScheduleInfo).next).toMatch(/T18:00:00\.000Z$/);

    // After the schedule is set: a newer complete partition, a newest one still being written,
    // and a new harness version made current.
    await partition('2025-01-29', 'day-29', true);
    await partition('2025-01-30', 'day-30', false);
    await harnessVersion('v2');
    await kit.store.put('inputs/harness/CURRENT', 'v2\n');

    const [kickoff] = await kit.context.runsQueue.getDelayed();
    if (!kickoff) throw new Error('the schedule added no kickoff job');
    const runId = `nightly-${compactUtc(scheduledAtOf(kickoff))}`;
    expect(runId).toMatch(/^nightly-\d{8}T180000Z$/);
    await kickoff.promote();
    await kit.startWorkers({ queues: ['collect', 'runs'] });
    const done = await waitFor(async () => {
      const status = await getRunStatus(kit.context, runId).catch(() => undefined);
      return status && (status.state === 'completed' || status.state === 'failed') ? status : undefined;
    }, 30_000);
    expect([done.state, done.error]).toEqual(['completed', undefined]);

    const manifest = runManifestSchema.parse(
      JSON.parse((await kit.store.getBuffer(`runs/${runId}/run-manifest.json`)).toString()),
    );
    expect(manifest.source).toBe('schedule:nightly');
    expect(
      manifest.resolvedInputs?.map((input) => [input.path, input.partition, input.resolved, input.skipped]),
    ).toEqual([
      [
        'stages.collect.tasks',
        'dt=2025-01-29',
        `${kit.artifactsRoot}/inputs/tasks/dt=2025-01-29/tasks.jsonl.gz`,
        ['dt=2025-01-30'],
      ],
      ['stages.collect.harness', 'v2', `${kit.artifactsRoot}/inputs/harness/v2`, undefined],
    ]);
    const collect = await readManifest(kit.store, `runs/${runId}/collect/manifest.json`);
    expect(collect.lineage.inputs.map((input) => input.uri)).toEqual([
      `${kit.artifactsRoot}/inputs/tasks/dt=2025-01-29/tasks.jsonl.gz`,
      `${kit.artifactsRoot}/inputs/harness/v2`,
    ]);
    expect(collect.stats).toMatchObject({ tasks: 3, accepted: 3 });

    const shown = await hat('runs', 'show', runId);
    expect(shown.stdout).toContain('latest stages.collect.tasks: dt=2025-01-29');
    expect(shown.stdout).toContain('latest stages.collect.harness: v2');

    // `hat run` resolves at once and says what it picked.
    await partition('2025-01-30', 'day-30', true);
    const now = await hat('run', config, '--run-id', 'manual-latest', '--json');
    expect(now.stderr).toBe('latest: stages.collect.tasks -> dt=2025-01-30\nlatest: stages.collect.harness -> v2\n');
    expect(JSON.parse(now.stdout).resolvedInputs.map((input: { partition: string }) => input.partition)).toEqual([
      'dt=2025-01-30',
      'v2',
    ]);
  });
});
