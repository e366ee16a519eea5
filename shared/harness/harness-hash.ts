import { hashValue } from '../hash/hash';
import type { Harness } from './harness-types';

/**
 * Content hash of a harness: sha256 (hex) of the canonical JSON of everything that changes what
 * the model sees or how its tool calls execute and are judged (persona, prompt, skills, tools
 * with bindings, hooks), in their model-visible order. `id`, `version` and `meta` are left out:
 * two harnesses with the same hash behave the same, whatever they are called.
 */
export function harnessHash(harness: Harness): string {
  return hashValue({
    persona: harness.persona,
    prompt: harness.prompt,
    skills: harness.skills,
    tools: harness.tools,
    // An empty skills list on a hook means the same as none.
    hooks: harness.hooks.map((hook) => ({
      ...hook,
      skills: hook.skills && hook.skills.length > 0 ? hook.skills : undefined,
    })),
  });
}
