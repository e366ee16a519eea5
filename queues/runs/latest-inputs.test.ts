import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { compareVersions, findLatestSpecs, resolveLatestInputs } from './latest-inputs';

describe('latest inputs', () => {
  const now = new Date('2025-02-01T18:00:00Z');
  let store: MemoryArtifactStore;
  // s3://logs/<key> lives at <key> of the memory store.
  const openObject = (uri: string) => ({ store, key: uri.replace(/^s3:\/\/logs\/?/, '') });
  const resolve = (stages: Record<string, unknown>) => resolveLatestInputs({ stages }, { openObject, now });

  beforeEach(async () => {
    store = new MemoryArtifactStore('logs');
    for (const key of [
      'tasks/dt=2025-01-30/tasks.jsonl.gz',
      'tasks/dt=2025-01-30/_SUCCESS',
      'tasks/dt=2025-01-31/tasks.jsonl.gz',
      'tasks/dt=2025-01-31/_SUCCESS',
      'tasks/dt=2025-01-31/extra.jsonl.gz',
      'tasks/dt=2025-01-31/.crc',
      // Newest, still being written: no _SUCCESS yet.
      'tasks/dt=2025-02-01/tasks.jsonl.gz',
      // Not a partition of the pattern.
      'tasks/backfill/tasks.jsonl.gz',
      'tasks/README.md',
    ]) {
      await store.put(key, 'x');
    }
  });

  it('picks the newest complete dated partition and records what it passed over', async () => {
    const { resolved, problems } = await resolve({
      collect: {
        tasks: { latest: 's3://logs/tasks', partition: 'dt=YYYY-MM-DD', file: 'tasks.jsonl.gz', marker: '_SUCCESS' },
      },
    });
    expect(problems).toEqual([]);
    expect(resolved).toEqual([
      {
        path: 'stages.collect.tasks',
        spec: { latest: 's3://logs/tasks/', partition: 'dt=YYYY-MM-DD', file: 'tasks.jsonl.gz', marker: '_SUCCESS' },
        partition: 'dt=2025-01-31',
        resolved: 'memory://logs/tasks/dt=2025-01-31/tasks.jsonl.gz',
        skipped: ['dt=2025-02-01'],
        resolvedAt: now.toISOString(),
      },
    ]);
  });

  it('without a file, resolves to every object of the partition but the marker and hidden names', async () => {
    const { resolved } = await resolve({
      augment: { trajectories: [{ latest: 's3://logs/tasks/', partition: 'dt=YYYY-MM-DD', marker: '_SUCCESS' }] },
    });
    expect(resolved[0]).toMatchObject({
      path: 'stages.augment.trajectories[0]',
      resolved: [
        'memory://logs/tasks/dt=2025-01-31/extra.jsonl.gz',
        'memory://logs/tasks/dt=2025-01-31/tasks.jsonl.gz',
      ],
    });
  });

  it('orders lexicographic partitions by name and nested date patterns by their fields', async () => {
    await store.put('hive/year=2024/month=12/day=31/part-0.jsonl.gz', 'x');
    await store.put('hive/year=2025/month=01/day=02/part-0.jsonl.gz', 'x');
    await store.put('hive/year=2025/month=01/day=10/part-0.jsonl.gz', 'x');
    const { resolved } = await resolve({
      a: { tasks: { latest: 's3://logs/tasks/', file: 'tasks.jsonl.gz' } },
      b: { tasks: { latest: 's3://logs/hive/', partition: 'year=YYYY/month=MM/day=DD', file: 'part-0.jsonl.gz' } },
    });
    // "dt=2025-02-01" is the greatest name holding tasks.jsonl.gz ("backfill" < "dt=...").
    expect(resolved.map((input) => input.partition)).toEqual(['dt=2025-02-01', 'year=2025/month=01/day=10']);
  });

  it('reports a prefix without a usable partition at its path, and bad specs with their fields', async () => {
    const { resolved, problems } = await resolve({
      collect: { tasks: { latest: 's3://logs/tasks/', partition: 'dt=YYYY-MM-DD', file: 'missing.jsonl.gz' } },
      shard: { inputs: [{ latest: 's3://logs/x/', partition: 'weekly', colour: 'red' }] },
    });
    expect(resolved).toEqual([]);
    expect(problems.map((problem) => [problem.path.join('.'), problem.message])).toEqual([
      ['stages.shard.inputs.0.partition', expect.stringMatching(/must be "lexicographic" or a pattern with YYYY/)],
      ['stages.shard.inputs.0', expect.stringMatching(/unknown key\(s\) "colour"/)],
      [
        'stages.collect.tasks',
        expect.stringMatching(
          /^\[NO_LATEST_INPUT\] no partition matching dt=YYYY-MM-DD holding missing\.jsonl\.gz under s3:\/\/logs\/tasks\/ \(found 3 incomplete: dt=2025-02-01, dt=2025-01-31, dt=2025-01-30\)/,
        ),
      ],
    ]);
  });

  it('takes the harness version CURRENT names, else the highest version folder', async () => {
    for (const version of ['v2', 'v10', 'v9']) await store.put(`harness/${version}/harness.yaml`, 'id: x');
    await store.put('harness/v11/README.md', 'not a harness');
    const highest = await resolve({ collect: { harness: { latestHarness: 's3://logs/harness/' } } });
    expect(highest.resolved[0]).toMatchObject({ partition: 'v10', resolved: 'memory://logs/harness/v10' });

    await store.put('harness/CURRENT', 'v9\n');
    const pointed = await resolve({ collect: { harness: { latestHarness: 's3://logs/harness/' } } });
    expect(pointed.resolved[0]).toMatchObject({ partition: 'v9', resolved: 'memory://logs/harness/v9' });

    await store.put('harness/CURRENT', 'v11');
    const broken = await resolve({ collect: { harness: { latestHarness: 's3://logs/harness/' } } });
    expect(broken.problems[0]?.message).toMatch(
      /\[BAD_HARNESS_POINTER\] s3:\/\/logs\/harness\/CURRENT names version "v11", but .*v11\/harness\.yaml does not exist/,
    );
  });

  it('finds specs anywhere in stage configs and compares versions numerically', () => {
    const { specs } = findLatestSpecs({ a: { x: [{ y: { latestHarness: 's3://b/h' } }] } });
    expect(specs).toEqual([{ path: ['stages', 'a', 'x', 0, 'y'], spec: { latestHarness: 's3://b/h/' } }]);
    expect(['1.10.0', 'v10', '1.9.0', 'v2'].sort(compareVersions)).toEqual(['1.9.0', '1.10.0', 'v2', 'v10']);
  });
});
