import { gunzipSync } from 'node:zlib';
import { MemoryArtifactStore } from '../../shared/artifacts/memory-artifact-store';
import { readManifest } from '../../shared/artifacts/manifest';
import { silentLogger } from '../../shared/log/logger';
import { cjkShare } from '../../shared/text/cjk-bytes';
import type { Trajectory } from '../../shared/trajectory/trajectory';
import { runStageLocally } from '../../queues/stage-kit/run-stage-locally';
import type { CollectOutput, ReviewEntry } from './collect-contract';
import { collectStage } from './processor';

const clock = { now: () => Date.parse('2025-01-01T00:00:00Z') };

async function run(store: MemoryArtifactStore, config: Record<string, unknown>): Promise<CollectOutput> {
  const result = await runStageLocally(collectStage, config, {
    store,
    openObject: (uri) => ({ store, key: store.keyOf(uri) }),
    logger: silentLogger(),
    clock,
    seed: 'unit',
  });
  return result.output as CollectOutput;
}

async function recordsOf<T>(store: MemoryArtifactStore, kind: string): Promise<T[]> {
  const manifest = await readManifest(store, 'manifest.json');
  const records: T[] = [];
  for (const object of manifest.objects.filter((entry) => entry.kind === kind)) {
    const text = gunzipSync(await store.getBuffer(object.key)).toString('utf8');
    for (const line of text.split('\n').filter(Boolean)) records.push(JSON.parse(line) as T);
  }
  return records;
}

describe('collect stage: best-of-N with a stochastic teacher', () => {
  const config = {
    generate: { count: 24, seed: 'best-of-n', itemCount: 200 },
    teacher: {
      adapter: 'scripted',
      policy: 'stochastic',
      seed: 3,
      errorRates: { hallucinatedNumber: 0.5, wrongArgument: 0.4, malformedJson: 0.2 },
    },
    samplesPerTask: 3,
    selection: { mode: 'best', minReward: 0.95 },
    tasksPerPart: 10,
  };

  it('keeps per task the best passing sample, rejects the rest with their reasons, lists tasks with none for review, and counts it all', async () => {
    const store = new MemoryArtifactStore('best');
    const output = await run(store, config);
    const accepted = await recordsOf<Trajectory>(store, 'trajectories');
    const rejected = await recordsOf<Trajectory>(store, 'rejected');
    const review = await recordsOf<ReviewEntry>(store, 'review');
    expect(output).toMatchObject({
      tasks: 24,
      samples: 72,
      accepted: accepted.length,
      rejected: rejected.length,
      review: review.length,
    });
    expect(accepted.length + rejected.length).toBe(72);
    // The stochastic teacher makes enough mistakes that some tasks fail every sample and some pass more than one.
    expect(review.length).toBeGreaterThan(0);
    expect(rejected.some((trajectory) => trajectory.meta.rejection?.reason === 'not_selected')).toBe(true);
    expect(rejected.some((trajectory) => trajectory.meta.rejection?.reason === 'below_threshold')).toBe(true);

    const samplesByTask = new Map<string, Trajectory[]>();
    for (const trajectory of [...accepted, ...rejected])
      samplesByTask.set(trajectory.taskId, [...(samplesByTask.get(trajectory.taskId) ?? []), trajectory]);
    expect(samplesByTask.size).toBe(24);
    for (const [taskId, samples] of samplesByTask) {
      expect(samples.map((sample) => sample.sampleIndex).sort()).toEqual([0, 1, 2]);
      const kept = accepted.filter((trajectory) => trajectory.taskId === taskId);
      const passing = samples.filter((sample) => sample.status === 'ok' && sample.reward.total >= 0.95);
      if (passing.length === 0) {
        expect(kept).toEqual([]);
        expect(review.find((entry) => entry.taskId === taskId)?.reasons.map((reason) => reason.sampleIndex)).toEqual([
          0, 1, 2,
        ]);
        continue;
      }
      const best = Math.max(...passing.map((sample) => sample.reward.total));
      expect(kept).toHaveLength(1);
      expect(kept[0].reward.total).toBe(best);
      expect(kept[0].sampleIndex).toBe(
        Math.min(...passing.filter((sample) => sample.reward.total === best).map((sample) => sample.sampleIndex)),
      );
      expect(kept[0].meta.rejection).toBeUndefined();
    }
    // The samples of a task differ: each sends its own request seed to the teacher.
    expect(new Set(accepted.concat(rejected).map((trajectory) => trajectory.model.sampling.seed))).toEqual(
      new Set([0, 1, 2]),
    );

    const stats = JSON.parse((await store.getBuffer('stats.json')).toString()) as {
      totals: {
        tasks: number;
        tasksAccepted: number;
        review: number;
        rejected: Record<string, number>;
        acceptanceRate: number;
      };
    };
    expect(stats.totals).toMatchObject({
      tasks: 24,
      tasksAccepted: 24 - review.length,
      review: review.length,
      acceptanceRate: Math.round(((24 - review.length) / 24) * 10_000) / 10_000,
    });
    expect(Object.values(stats.totals.rejected).reduce((sum, value) => sum + value, 0)).toBe(rejected.length);
    expect(output.acceptanceRate).toBe(stats.totals.acceptanceRate);
  });

  it('writes byte-identical objects for the same config and seed; mode all keeps every passing sample', async () => {
    const first = new MemoryArtifactStore('first');
    const second = new MemoryArtifactStore('second');
    await run(first, config);
    await run(second, config);
    const manifest = await readManifest(first, 'manifest.json');
    for (const object of manifest.objects)
      expect((await second.getBuffer(object.key)).equals(await first.getBuffer(object.key))).toBe(true);

    const all = new MemoryArtifactStore('all');
    const output = await run(all, { ...config, selection: { mode: 'all', minReward: 0.95 } });
    const rejected = await recordsOf<Trajectory>(all, 'rejected');
    expect(rejected.every((trajectory) => trajectory.meta.rejection?.reason !== 'not_selected')).toBe(true);
    expect(output.accepted).toBeGreaterThan(output.tasks - output.review);
  });
});

describe('collect stage: generated tasks with text cjk-heavy', () => {
  const generate = { count: 48, seed: 'cjk-collect', itemCount: 300 };
  const collected = async (text?: string) => {
    const store = new MemoryArtifactStore(`cjk-${text ?? 'default'}`);
    const output = await run(store, { generate: { ...generate, ...(text ? { text } : {}) }, tasksPerPart: 24 });
    return { output, trajectories: await recordsOf<Trajectory>(store, 'trajectories'), store };
  };

  it('the scripted expert passes as many tasks as with the default text, within every hook, on CJK-heavy records', async () => {
    const plain = await collected();
    const heavy = await collected('cjk-heavy');
    expect(heavy.output.tasks).toBe(48);
    expect(heavy.output.accepted).toBeGreaterThanOrEqual(Math.min(plain.output.accepted, 46));
    const replies = heavy.trajectories.flatMap((trajectory) =>
      trajectory.messages.flatMap((message) =>
        message.role === 'assistant' && message.content !== null ? [message.content] : [],
      ),
    );
    // The sample harness's reply_length hook: 60 characters.
    expect(Math.max(...replies.map((reply) => [...reply].length))).toBeLessThanOrEqual(60);
    expect(heavy.trajectories.every((trajectory) => trajectory.reward.components.hooks === 1)).toBe(true);
    const share = (trajectories: Trajectory[]) =>
      cjkShare(trajectories.map((trajectory) => JSON.stringify(trajectory)).join('\n'));
    expect(share(heavy.trajectories)).toBeGreaterThan(share(plain.trajectories));
    const viewer = (trajectories: Trajectory[]) =>
      trajectories.flatMap((trajectory) =>
        trajectory.messages.flatMap((message) => (message.role === 'user' ? [message.content.split('\n')[0]] : [])),
      );
    expect(cjkShare(viewer(heavy.trajectories).join(''))).toBeGreaterThan(0.85);
    expect(viewer(heavy.trajectories).join('').length).toBeGreaterThan(
      2.5 * viewer(plain.trajectories).join('').length,
    );
  });

  it('refuses a text it does not know, naming the field and the values it takes', async () => {
    await expect(
      run(new MemoryArtifactStore('bad-text'), { generate: { ...generate, text: 'cjk' }, tasksPerPart: 24 }),
    ).rejects.toThrow(
      /\[STAGE_INPUT_INVALID\][\s\S]*generate\.text: Invalid option: expected one of "default"\|"cjk-heavy"/,
    );
  });
});
