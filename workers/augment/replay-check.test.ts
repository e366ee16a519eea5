import type { Harness } from '../../shared/harness/harness-types';
import { augmentTrajectory, prepareVariant } from '../../shared/harness/hsa/augment-trajectory';
import { generateVariant } from '../../shared/harness/hsa/generate-variant';
import { parseRecordedTrajectory } from '../../shared/harness/hsa/rewrite-trajectory';
import type { Variant } from '../../shared/harness/hsa/variant-mapping';
import { loadHarness } from '../../shared/harness/load-harness';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { Rng } from '../../shared/random/rng';
import { renderContextOf } from '../../shared/simulator/room-context';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { createWorld } from '../../shared/simulator/world/world';
import type { Trajectory } from '../../shared/trajectory/trajectory';
import { expertTrajectories } from './expert-trajectories';
import { replayCheck, scoreRecorded, scoredTurns } from './replay-check';

let canonical: Harness;
let task: Task;
let trajectory: Trajectory;
let variant: Variant;

beforeAll(async () => {
  canonical = await loadHarness(sampleHarnessDirectory());
  const { tasks, trajectories } = await expertTrajectories(canonical, { count: 60, seed: 'replay-check' });
  const index = trajectories.findIndex((candidate) =>
    candidate.messages.some(
      (message) =>
        message.role === 'assistant' && message.tool_calls?.some((call) => call.function.name === 'recommend_size'),
    ),
  );
  task = tasks[index];
  trajectory = trajectories[index];
  // A variant that renamed recommend_size's height parameter (found by seed, so the test reads the real family's output).
  for (let seed = 0; ; seed++) {
    const candidate = generateVariant(canonical, { families: ['tool_schemas'], rng: new Rng(`replay-check/${seed}`) });
    const entry = candidate.mapping.tools.recommend_size;
    if (entry && entry.parameters.height_cm !== 'height_cm' && entry.parameters.weight_kg !== 'weight_kg') {
      variant = candidate;
      break;
    }
  }
});

function run(target: Variant) {
  const world = createWorld(task.room);
  const context = renderContextOf(world);
  const parsed = parseRecordedTrajectory(trajectory, canonical, context);
  if (!parsed.ok) throw new Error(parsed.detail);
  const outcome = augmentTrajectory(trajectory, parsed.timeline, context, prepareVariant(canonical, target));
  if (!outcome.ok) throw new Error(`${outcome.reason}: ${outcome.detail}`);
  const replay = replayCheck({
    task,
    world,
    variant: target.harness,
    messages: outcome.trajectory.messages,
    calls: outcome.calls,
    recordedReward: scoreRecorded(task, world, canonical, trajectory),
    turnCount: scoredTurns(trajectory, task),
  });
  return { outcome, replay };
}

describe('replay check', () => {
  it('passes a correct variant: the same tool results, and a reward no lower than recorded', () => {
    const { outcome, replay } = run(variant);
    expect(outcome.passed).toEqual(['timeline', 'calls', 'constraints', 'round_trip', 'schema', 'no_leakage']);
    expect(replay).toMatchObject({ ok: true });
    if (replay.ok) expect(replay.reward.total).toBeGreaterThanOrEqual(trajectory.reward.total);
  });

  it('catches a binding that sends a renamed parameter to the wrong canonical argument, which every other check passes', () => {
    const broken = structuredClone(variant);
    const entry = broken.mapping.tools.recommend_size;
    const tool = broken.harness.tools.find((candidate) => candidate.name === entry.name)!;
    // Height goes where weight should, and back: the mapping (and so the round trip) still agrees with itself.
    tool.binding.arguments = {
      [entry.parameters.item_id]: 'item_id',
      [entry.parameters.height_cm]: 'weight_kg',
      [entry.parameters.weight_kg]: 'height_cm',
    };
    const { outcome, replay } = run(broken);
    expect(outcome.passed).toEqual(['timeline', 'calls', 'constraints', 'round_trip', 'schema', 'no_leakage']);
    expect(replay).toMatchObject({ ok: false, reason: 'replay_result' });
    if (!replay.ok) expect(replay.detail).toContain(entry.name);
  });
});
