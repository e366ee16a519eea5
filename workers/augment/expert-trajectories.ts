import type { Harness } from '../../shared/harness/harness-types';
import { runEpisode } from '../../shared/simulator/agent-loop';
import { ScriptedExpert } from '../../shared/simulator/policies/scripted-expert';
import { generateTasks } from '../../shared/simulator/tasks/generate-tasks';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import type { Trajectory } from '../../shared/trajectory/trajectory';

/**
 * Teacher trajectories without the collect stage: the simulator's scripted expert plays
 * generated tasks under a harness through the agent loop. For benchmarks, tests and `hat demo`
 * runs that start at augment; deterministic under the seed.
 */
export async function expertTrajectories(
  harness: Harness,
  options: { count: number; seed: string; itemCount?: number },
): Promise<{ tasks: Task[]; trajectories: Trajectory[] }> {
  const tasks = generateTasks({
    count: options.count,
    seed: options.seed,
    world: { itemCount: options.itemCount ?? 500 },
  });
  const expert = new ScriptedExpert({ tasks, harnesses: [harness] });
  const trajectories: Trajectory[] = [];
  for (const task of tasks) trajectories.push(await runEpisode({ policy: expert, harness, task, seed: options.seed }));
  return { tasks, trajectories };
}
