import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, readManifest, writeManifest } from '../../shared/artifacts/manifest';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { variantMappingSchema } from '../../shared/harness/hsa/variant-mapping';
import { loadHarness, loadHarnessFromFiles } from '../../shared/harness/load-harness';
import { renderHarness } from '../../shared/harness/render';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { silentLogger } from '../../shared/log/logger';
import { renderContextOf } from '../../shared/simulator/room-context';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { createWorld } from '../../shared/simulator/world/world';
import { trajectorySchema, type Trajectory } from '../../shared/trajectory/trajectory';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import { finalReplies } from '../../shared/harness/hsa/variant-checks';
import { relabelEntrySchema } from './augment-contract';
import type { AugmentStats } from './augment-stats';
import { expertTrajectories } from './expert-trajectories';
import { collectStage } from '../collect/processor';
import { augmentStage } from './processor';

const clock = { now: () => Date.parse('2025-03-01T00:00:00Z') };
let canonical: Harness;
let tasks: Task[];
let trajectories: Trajectory[];

beforeAll(async () => {
  canonical = await loadHarness(sampleHarnessDirectory());
  ({ tasks, trajectories } = await expertTrajectories(canonical, { count: 24, seed: 'augment-stage' }));
});

async function inputStore(name: string): Promise<MemoryArtifactStore> {
  const store = new MemoryArtifactStore(name);
  const written = await writeJsonl(store, 'collect/trajectories.jsonl.gz', trajectories);
  const tasksWritten = await writeJsonl(store, 'collect/tasks.jsonl.gz', tasks);
  // Laid out as the collect stage does: one manifest listing trajectories and the tasks they played, by kind.
  await writeManifest(
    store,
    'collect/manifest.json',
    {
      stage: 'collect',
      runId: 'r',
      objects: [
        manifestObjectOf(written, { schemaVersion: 1, format: 'jsonl.gz', kind: 'trajectories' }),
        manifestObjectOf(tasksWritten, { schemaVersion: 1, format: 'jsonl.gz', kind: 'tasks' }),
      ],
      lineage: { inputs: [], configHash: 'x' },
    },
    { clock: () => new Date(clock.now()) },
  );
  return store;
}

async function augment(store: MemoryArtifactStore, config: Record<string, unknown>) {
  const result = await runStageLocally(
    augmentStage,
    {
      trajectories: store.uriOf('collect/manifest.json'),
      harness: sampleHarnessDirectory(),
      variantPool: 6,
      seed: 'hsa',
      ...config,
    },
    {
      store,
      outputPrefix: 'augment',
      openObject: (uri) => ({ store, key: store.keyOf(uri) }),
      logger: silentLogger(),
      clock,
      seed: 'run-seed',
    },
  );
  return result.output as {
    manifestUri: string;
    trajectories: number;
    dropped: number;
    relabel: number;
    variants: number;
  };
}

async function objects(store: MemoryArtifactStore, prefix: string): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for await (const object of store.list(prefix)) {
    if (object.key.includes('/_state/')) continue;
    found.set(object.key, (await store.getBuffer(object.key)).toString('base64'));
  }
  return found;
}

async function readAll<T>(store: MemoryArtifactStore, key: string): Promise<T[]> {
  const records: T[] = [];
  for await (const record of readJsonl<T>(store, key)) records.push(record);
  return records;
}

describe('augment stage', () => {
  it('emits checked variant trajectories whose system prompt, tools and harness hash come from a stored variant', async () => {
    const store = await inputStore('main');
    const output = await augment(store, { recordsPerPart: 10 });
    const manifest = await readManifest(store, 'augment/manifest.json');
    const trajectoryKeys = manifest.objects
      .filter((object) => object.key.startsWith('augment/trajectories/'))
      .map((object) => object.key);
    expect(trajectoryKeys).toEqual([
      'augment/trajectories/part-00000.jsonl.gz',
      'augment/trajectories/part-00001.jsonl.gz',
      'augment/trajectories/part-00002.jsonl.gz',
    ]);
    const emitted = (await Promise.all(trajectoryKeys.map((key) => readAll<Trajectory>(store, key)))).flat();
    expect(emitted).toHaveLength(output.trajectories);
    expect(output.trajectories).toBeGreaterThan(trajectories.length * 3);

    const sources = new Map(trajectories.map((trajectory) => [trajectory.id, trajectory]));
    const tasksById = new Map(tasks.map((task) => [task.id, task]));
    for (const augmented of emitted) {
      trajectorySchema.parse(augmented);
      const source = sources.get(augmented.meta.sourceTrajectoryId as string) as Trajectory;
      expect(augmented.taskId).toBe(source.taskId);
      const prefix = `augment/variants/${augmented.harness.variantHash}/`;
      const files: Record<string, string> = {};
      for await (const object of store.list(prefix))
        files[object.key.slice(prefix.length)] = (await store.getBuffer(object.key)).toString('utf8');
      const variant = loadHarnessFromFiles(files, prefix);
      expect(harnessHash(variant)).toBe(augmented.harness.hash);
      expect(variantMappingSchema.parse(JSON.parse(files['mapping.json'])).families).toEqual(
        augmented.harness.families,
      );
      const rendered = renderHarness(
        variant,
        renderContextOf(createWorld((tasksById.get(augmented.taskId) as Task).room)),
      );
      expect(augmented.messages[0]).toEqual({ role: 'system', content: rendered.systemPrompt });
      expect(augmented.tools).toEqual(rendered.tools);
      // Replies are the teacher's own words.
      expect(finalReplies(augmented)).toEqual(finalReplies(source));
    }

    const stats = JSON.parse((await store.getBuffer('augment/stats.json')).toString('utf8')) as AugmentStats;
    expect(stats.trajectories.read).toBe(trajectories.length);
    expect(stats.pairs.generated).toBe(trajectories.length * 4);
    expect(stats.pairs.kept + output.dropped).toBe(stats.pairs.generated);
    expect(stats.checks.replay.checked).toBe(
      stats.pairs.kept + (stats.pairs.dropped.replay_result ?? 0) + (stats.pairs.dropped.replay_reward ?? 0),
    );
    const html = (await store.getBuffer('augment/report.html')).toString('utf8');
    expect(html).toContain('Before (canonical harness)');
    expect(html).toContain('Harness diff (canonical → variant)');
    expect(html).not.toMatch(/<script|<link|src=|https?:\/\//);
    // The manifest comes last and lists every variant file it vouches for.
    expect(manifest.objects.some((object) => object.key.endsWith('/mapping.json'))).toBe(true);
  });

  it('gives byte-identical output for the same input and seed, however the input is split into parts', async () => {
    // Two stores with the same root URI (manifests name objects by URI).
    const first = await inputStore('same');
    const second = await inputStore('same');
    await augment(first, { recordsPerPart: 10 });
    await augment(second, { recordsPerPart: 10 });
    const left = await objects(first, 'augment/');
    const right = await objects(second, 'augment/');
    expect([...right.keys()]).toEqual([...left.keys()]);
    expect([...left.keys()].filter((key) => left.get(key) !== right.get(key))).toEqual([]);

    const whole = await inputStore('whole');
    await augment(whole, { recordsPerPart: 1000 });
    const records = async (store: MemoryArtifactStore) => {
      const keys: string[] = [];
      for await (const object of store.list('augment/trajectories/')) keys.push(object.key);
      return (await Promise.all(keys.map((key) => readAll<Trajectory>(store, key)))).flat();
    };
    expect(await records(whole)).toEqual(await records(first));
  });

  it('puts trajectories whose reply misses a tightened constraint on the relabel list instead of emitting them', async () => {
    const store = await inputStore('relabel');
    const output = await augment(store, { families: { hooks: 1 }, variantPool: 12, recordsPerPart: 1000 });
    expect(output.relabel).toBeGreaterThan(0);
    const entries = await readAll<unknown>(store, 'augment/relabel.jsonl.gz');
    expect(entries).toHaveLength(output.relabel);
    const sources = new Map(trajectories.map((trajectory) => [trajectory.id, trajectory]));
    for (const raw of entries) {
      const entry = relabelEntrySchema.parse(raw);
      expect(entry.reason).toBe('constraint_changed');
      const mapping = variantMappingSchema.parse(
        JSON.parse((await store.getBuffer(`augment/variants/${entry.variantHash}/mapping.json`)).toString('utf8')),
      );
      const limit = Object.values(mapping.hooks).find((hook) => hook.constraint?.after.type === 'max_chars')?.constraint
        ?.after as { value: number };
      const source = sources.get(entry.trajectoryId) as Trajectory;
      expect(entry.taskId).toBe(source.taskId);
      expect(Math.max(...finalReplies(source).map((reply) => [...reply.trim()].length))).toBeGreaterThan(limit.value);
    }
  });

  it("takes the collect stage's manifest as its input (hat stage augment --in), tasks included", async () => {
    const store = new MemoryArtifactStore('chain');
    const options = {
      store,
      openObject: (uri: string) => ({ store, key: store.keyOf(uri) }),
      logger: silentLogger(),
      clock,
      seed: 'chain',
    };
    const collected = (
      await runStageLocally(
        collectStage,
        { generate: { count: 12, seed: 'chain', itemCount: 300 } },
        { ...options, outputPrefix: 'collect' },
      )
    ).output as { manifestUri: string };
    const result = await runStageLocally(
      augmentStage,
      { inputs: [collected.manifestUri], variantPool: 4, variantsPerTrajectory: 2 },
      { ...options, outputPrefix: 'augment' },
    );
    const output = result.output as { trajectories: number; dropped: number };
    const accepted = (await readManifest(store, store.keyOf(collected.manifestUri))).objects
      .filter((object) => object.kind === 'trajectories')
      .reduce((sum, object) => sum + (object.records ?? 0), 0);
    expect(accepted).toBeGreaterThan(0);
    expect(output.trajectories + output.dropped).toBe(accepted * 2);
    expect(output.trajectories).toBeGreaterThan(accepted);
  });

  it('refuses bad input before any part runs', async () => {
    const store = await inputStore('bad');
    await expect(augment(store, { trajectories: store.uriOf('collect/trajectories.jsonl.gz') })).rejects.toThrow(
      /^\[MISSING_TASKS\] augment: the replay check needs the tasks/,
    );
    await expect(augment(store, { tasks: store.uriOf('collect/no-tasks.jsonl.gz') })).rejects.toThrow(
      /^\[MISSING_INPUT\] tasks: memory:\/\/bad\/collect\/no-tasks\.jsonl\.gz does not exist/,
    );
    await expect(
      augment(store, {
        trajectories: store.uriOf('collect/nothing.jsonl.gz'),
        tasks: store.uriOf('collect/manifest.json'),
      }),
    ).rejects.toThrow(/^\[MISSING_INPUT\] trajectories: memory:\/\/bad\/collect\/nothing\.jsonl\.gz does not exist/);
    await expect(augment(store, { families: { hooks: 0 } })).rejects.toThrow(
      /STAGE_INPUT_INVALID[\s\S]*at least one family/,
    );
  });
});
