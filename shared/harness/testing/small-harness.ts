import { join } from 'node:path';
import { loadHarness } from '../load-harness';
import { sampleHarnessDirectory } from '../sample-harness';
import type { Harness } from '../harness-types';
import { writeHarness } from '../write-harness';

/**
 * The sample live-host harness cut to a few tools (by default `get_item_detail` and
 * `get_sku_stock`), the first skill that uses only those, and the hooks that name no skill: a
 * valid harness whose prompt is about a fifth of the sample's. For tests that run a real (tiny)
 * model over the prompt, where prefill of the whole sample harness costs seconds and proves
 * nothing more.
 */
export async function smallHarness(tools: readonly string[] = ['get_item_detail', 'get_sku_stock']): Promise<Harness> {
  const sample = await loadHarness(sampleHarnessDirectory());
  const kept = new Set(tools);
  return {
    ...sample,
    tools: sample.tools.filter((tool) => kept.has(tool.name)),
    skills: sample.skills.filter((skill) => skill.tools.every((tool) => kept.has(tool))).slice(0, 1),
    hooks: sample.hooks.filter((hook) => hook.skills === undefined),
  };
}

/** Writes `smallHarness(tools)` to `<directory>/harness` and returns that directory. */
export async function writeSmallHarness(directory: string, tools?: readonly string[]): Promise<string> {
  const harnessDirectory = join(directory, 'harness');
  await writeHarness(await smallHarness(tools), harnessDirectory);
  return harnessDirectory;
}
