import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { readManifest } from '../shared/artifacts/manifest';
import { loadEnv } from '../shared/config/env';
import { enqueueRun } from '../queues/runs/flows';
import { openQueueContext } from '../queues/bullmq/queue-context';
import { planRun } from '../queues/runs/run-config';
import { watchRun } from '../queues/runs/run-control';
import { freePort } from './support/free-port';
import { createQueueTestKit, waitFor, type QueueTestKit } from './support/queue-test-kit';
import { scanKeyBatches } from '../queues/bullmq/redis-connection';

/**
 * The queues on a real three-node Redis Cluster started here (cluster mode, no replicas): a
 * fan-out flow across two stage queues and `runs` under the hash-tagged prefix, all in one slot.
 */

const redisServer = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
const haveRedisServer = redisServer.status === 0 && spawnSync('redis-cli', ['--version']).status === 0;
if (!haveRedisServer) {
  console.warn(
    'test/redis-cluster.int.test.ts skipped: redis-server / redis-cli are not installed (apt-get install redis-server)',
  );
}
const describeWithRedis = haveRedisServer ? describe : describe.skip;

interface LocalCluster {
  ports: number[];
  nodes: string;
  stop(): Promise<void>;
}

async function startLocalCluster(directory: string): Promise<LocalCluster> {
  const ports: number[] = [];
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    );
  };
  try {
    for (let index = 0; index < 3; index++) {
      // Explicit bus ports: the default (port + 10000) may be taken or past 65535.
      const [port, busPort] = [await freePort(), await freePort()];
      ports.push(port);
      const child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${port}.conf`,
          '--cluster-port',
          String(busPort),
          '--cluster-node-timeout',
          '5000',
          '--dir',
          directory,
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
        ],
        { stdio: 'ignore' },
      );
      children.push(child);
    }
    for (const port of ports) {
      await waitFor(
        async () => spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim() === 'PONG',
        10_000,
        50,
      );
    }
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${create.stdout}${create.stderr}`);
    for (const port of ports) {
      await waitFor(
        async () =>
          spawnSync('redis-cli', ['-p', String(port), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes(
            'cluster_state:ok',
          ),
        20_000,
        100,
      );
    }
    return { ports, nodes: ports.map((port) => `127.0.0.1:${port}`).join(','), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

describeWithRedis('Redis Cluster (three local nodes)', () => {
  let directory: string;
  let cluster: LocalCluster;
  let kit: QueueTestKit | undefined;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'hat-redis-cluster-'));
    cluster = await startLocalCluster(directory);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    await rm(directory, { recursive: true, force: true });
  });
  afterEach(async () => {
    await kit?.cleanup();
    kit = undefined;
  });

  it('runs a fan-out flow through the cluster with every key of the prefix in one slot', async () => {
    kit = await createQueueTestKit({ REDIS_CLUSTER_NODES: cluster.nodes }, { hashTag: true });
    expect(kit.context.connection).toBeInstanceOf(Cluster);
    await kit.startWorkers({ queues: ['fanout-demo', 'noop', 'runs'], concurrency: 4 });
    const plan = planRun(
      {
        runId: 'cluster',
        stages: {
          'fanout-demo': { parts: 6, recordsPerPart: 3, faults: { transientOnFirstAttempt: [2] } },
          noop: { inputs: ['${stages.fanout-demo.manifestUri}'] },
        },
      },
      { env: kit.env, now: new Date() },
    );
    expect(await enqueueRun(kit.context, plan)).toEqual({ runId: 'cluster', enqueued: true });

    const status = await watchRun(kit.context, 'cluster', { intervalMs: 100 });
    expect(status.state).toBe('completed');
    expect(status.stages.map((stage) => [stage.name, stage.state])).toEqual(
      expect.arrayContaining([
        ['fanout-demo', 'completed'],
        ['noop', 'completed'],
      ]),
    );
    const manifest = await readManifest(kit.store, 'runs/cluster/fanout-demo/manifest.json');
    expect(manifest.objects).toHaveLength(6);
    expect(manifest.stats).toMatchObject({ parts: 6, records: 18 });

    // The hash tag put every key on the node that owns its slot, and nowhere else.
    const keysPerNode: number[] = [];
    for (const port of cluster.ports) {
      const node = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
      await node.connect();
      const keys: string[] = [];
      for await (const batch of scanKeyBatches(node, `${kit.prefix}:*`)) keys.push(...batch);
      keysPerNode.push(keys.length);
      if (keys.length > 0) await node.unlink(...keys);
      await node.quit();
    }
    expect(keysPerNode.filter((count) => count > 0)).toHaveLength(1);
    expect(Math.max(...keysPerNode)).toBeGreaterThan(10);
  });

  it('defaults the prefix to {hat} in cluster mode and refuses a prefix without a hash tag', async () => {
    expect(loadEnv({ REDIS_CLUSTER_NODES: cluster.nodes }).HAT_REDIS_PREFIX).toBe('{hat}');
    expect(() => loadEnv({ REDIS_CLUSTER_NODES: cluster.nodes, HAT_REDIS_PREFIX: 'hat' })).toThrow(
      /HAT_REDIS_PREFIX: "hat" has no hash tag, but REDIS_CLUSTER_NODES is set; use a prefix such as \{hat\}/,
    );
    expect(() => loadEnv({ REDIS_CLUSTER_NODES: 'not a node list' })).toThrow(/REDIS_CLUSTER_NODES/);
    const context = await openQueueContext(
      loadEnv({ REDIS_CLUSTER_NODES: `redis://127.0.0.1:${cluster.ports[1]}`, HAT_REDIS_PREFIX: '{probe}' }),
    );
    try {
      // One seed is enough: the client discovers the other nodes.
      const nodes = (context.connection as Cluster).nodes('master');
      expect(nodes).toHaveLength(3);
    } finally {
      await context.close();
    }
  });

  it('names REDIS_CLUSTER_NODES when the cluster cannot be reached', async () => {
    const unreachable = loadEnv({ REDIS_CLUSTER_NODES: `127.0.0.1:${await freePort()}` });
    await expect(openQueueContext(unreachable)).rejects.toThrow(/\[REDIS_UNAVAILABLE\].*set REDIS_CLUSTER_NODES/);
  });
});
