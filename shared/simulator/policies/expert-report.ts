import type { Harness } from '../../harness/harness-types';
import { harnessHash } from '../../harness/harness-hash';
import { runEpisode } from '../agent-loop';
import { generateTasks, type GenerateTasksOptions } from '../tasks/generate-tasks';
import { taskCategories, type TaskCategory } from '../tasks/task-schema';
import { ScriptedExpert } from './scripted-expert';

/** Reward distribution of one group of episodes. */
export interface RewardSummary {
  episodes: number;
  mean: number;
  /** 10th percentile (linear interpolation). */
  p10: number;
  /** Share of episodes with reward >= 0.95. */
  shareAtLeast095: number;
}

export interface ExpertReport {
  seed: string;
  count: number;
  harness: { id: string; hash: string };
  overall: RewardSummary;
  byCategory: Partial<Record<TaskCategory, RewardSummary>>;
  /** Episodes that did not end with status ok. */
  notOk: number;
}

/** Linear-interpolation percentile of sorted values (q in [0, 1]). */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - lower);
}

export function summarizeRewards(values: number[]): RewardSummary {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (value: number) => Math.round(value * 10_000) / 10_000;
  return {
    episodes: values.length,
    mean: round(values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length)),
    p10: round(percentile(sorted, 0.1)),
    shareAtLeast095: round(values.filter((value) => value >= 0.95).length / Math.max(1, values.length)),
  };
}

/** Generates tasks, plays each once with the scripted expert under the harness, and summarizes the rewards. */
export async function expertReport(options: GenerateTasksOptions & { harness: Harness }): Promise<ExpertReport> {
  const tasks = generateTasks(options);
  const expert = new ScriptedExpert({ tasks, harnesses: [options.harness] });
  const hash = harnessHash(options.harness);
  const rewards = new Map<TaskCategory, number[]>();
  const all: number[] = [];
  let notOk = 0;
  for (const task of tasks) {
    const trajectory = await runEpisode({ policy: expert, harness: options.harness, task, harnessHash: hash });
    if (trajectory.status !== 'ok') notOk++;
    all.push(trajectory.reward.total);
    const list = rewards.get(task.category) ?? [];
    list.push(trajectory.reward.total);
    rewards.set(task.category, list);
  }
  const byCategory: Partial<Record<TaskCategory, RewardSummary>> = {};
  for (const category of taskCategories) {
    const values = rewards.get(category);
    if (values !== undefined) byCategory[category] = summarizeRewards(values);
  }
  return {
    seed: String(options.seed),
    count: tasks.length,
    harness: { id: options.harness.id, hash },
    overall: summarizeRewards(all),
    byCategory,
    notOk,
  };
}
