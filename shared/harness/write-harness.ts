import { stringify } from 'yaml';
import {
  HARNESS_FILE,
  joinFrontMatter,
  skillFilePath,
  toolFilePath,
  writeHarnessFiles,
  type HarnessFiles,
} from './harness-files';
import { HARNESS_FILE_SCHEMA_VERSION } from './harness-schema';
import type { Harness, HookDefinition } from './harness-types';
import { stringifyJsonKeepingFloats } from '../text/python-values';

const yamlOptions = { lineWidth: 0, indent: 2 } as const;

function isSorted(names: string[]): boolean {
  return names.every((name, index) => index === 0 || names[index - 1] < name);
}

function hookToYaml(hook: HookDefinition): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    id: hook.id,
    event: hook.event,
    placement: hook.placement,
    when: hook.when,
    text: hook.text,
    constraint: hook.constraint,
  };
  if (hook.skills !== undefined) entry.skills = hook.skills;
  return entry;
}

/**
 * The files of a harness (the inverse of `loadHarnessFromFiles`: loading them gives back an
 * equal harness). Skill and tool order is written to `harness.yaml` only when it is not the
 * sorted order the loader assumes by default.
 */
export function harnessToFiles(harness: Harness): HarnessFiles {
  const skillIds = harness.skills.map((skill) => skill.id);
  const toolNames = harness.tools.map((tool) => tool.name);
  const order: Record<string, string[]> = {};
  if (!isSorted(skillIds)) order.skills = skillIds;
  if (!isSorted(toolNames)) order.tools = toolNames;

  const manifest: Record<string, unknown> = {
    schemaVersion: HARNESS_FILE_SCHEMA_VERSION,
    id: harness.id,
    version: harness.version,
    persona: { name: harness.persona.name, style: harness.persona.style },
    prompt: {
      format: harness.prompt.format,
      sections: harness.prompt.sections.map((section) => ({
        id: section.id,
        kind: section.kind,
        title: section.title,
        content: section.content,
      })),
    },
    hooks: harness.hooks.map(hookToYaml),
  };
  if (Object.keys(order).length > 0) manifest.order = order;
  if (harness.meta !== undefined) manifest.meta = harness.meta;

  const files: HarnessFiles = { [HARNESS_FILE]: stringify(manifest, yamlOptions) };
  for (const skill of harness.skills) {
    const frontMatter = stringify(
      { id: skill.id, name: skill.name, description: skill.description, tools: skill.tools },
      yamlOptions,
    );
    files[skillFilePath(skill.id)] = joinFrontMatter(frontMatter, skill.body);
  }
  for (const tool of harness.tools) {
    const file = {
      type: 'function',
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      'x-hat-binding': tool.binding,
    };
    // A float such as `"minimum": 1.0` stays `1.0`, as the tool file it was loaded from wrote it.
    files[toolFilePath(tool.name)] = `${stringifyJsonKeepingFloats(file, 2)}\n`;
  }
  return files;
}

/** Writes a harness directory (see `writeHarnessFiles` for how stale files are handled). */
export async function writeHarness(harness: Harness, directory: string): Promise<void> {
  await writeHarnessFiles(harnessToFiles(harness), directory);
}
