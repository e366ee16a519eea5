import { loadHarness } from '../load-harness';
import { sampleHarnessDirectory } from '../sample-harness';
import type { Harness } from '../harness-types';
import { writeHarness } from '../write-harness';

/**
 * The sample live-host harness cut down to one skill (`price_calculation`), the tools it names and
 * the persona, rules, skills and tools sections, with no hooks: a valid harness whose rendered
 * prompt is about a fifth of the sample's. For tests that run a real (tiny) model over the prompt,
 * where prefill of the whole sample harness costs seconds and proves nothing more.
 */
export async function smallHarness(): Promise<Harness> {
  const sample = await loadHarness(sampleHarnessDirectory());
  const skills = sample.skills.filter((skill) => skill.id === 'price_calculation');
  const toolNames = new Set(skills.flatMap((skill) => skill.tools));
  return {
    ...sample,
    id: `${sample.id}-small`,
    prompt: {
      ...sample.prompt,
      sections: sample.prompt.sections.filter((section) =>
        ['persona', 'rules', 'skills', 'tools_guide'].includes(section.kind),
      ),
    },
    skills,
    tools: sample.tools.filter((tool) => toolNames.has(tool.name)),
    hooks: [],
  };
}

/** Writes `smallHarness()` to `directory` and returns the directory. */
export async function writeSmallHarness(directory: string): Promise<string> {
  await writeHarness(await smallHarness(), directory);
  return directory;
}
