import type { Harness, ToolBinding, ToolCapability, ToolDefinition } from './harness-types';

/**
 * Translation between a harness tool's own argument shape and its capability's canonical
 * arguments, through `binding.arguments` (tool path, dot-separated for nested arguments ->
 * canonical name) and `binding.enumValues` (canonical name -> { tool's spelling: canonical
 * value }). A canonical name no path maps onto keeps its own name; a canonical name that a path
 * does map onto is only read from that path, so a model writing the canonical name under a
 * renamed harness is not silently accepted.
 */

export function getPath(value: unknown, path: string): unknown {
  let current = value;
  for (const segment of path.split('.')) {
    if (current === null || typeof current !== 'object' || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const segments = path.split('.');
  let current = target;
  for (const segment of segments.slice(0, -1)) {
    const next = current[segment];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) current[segment] = {};
    current = current[segment] as Record<string, unknown>;
  }
  current[segments[segments.length - 1]] = value;
}

function mapEnum(value: unknown, mapping: Record<string, string> | undefined): unknown {
  if (mapping === undefined) return value;
  if (typeof value === 'string') return mapping[value] ?? value;
  if (Array.isArray(value))
    return value.map((entry) => (typeof entry === 'string' ? (mapping[entry] ?? entry) : entry));
  return value;
}

function invert(mapping: Record<string, string>): Record<string, string> {
  const inverse: Record<string, string> = {};
  for (const [from, to] of Object.entries(mapping)) if (!(to in inverse)) inverse[to] = from;
  return inverse;
}

/** The capability's canonical arguments from the arguments a model wrote for this tool. */
export function toCanonicalArguments(
  binding: ToolBinding,
  toolArguments: Record<string, unknown>,
): Record<string, unknown> {
  const canonical: Record<string, unknown> = {};
  const mapping = binding.arguments;
  if (mapping === undefined) {
    Object.assign(canonical, toolArguments);
  } else {
    const mappedTargets = new Set(Object.values(mapping));
    const mappedRoots = new Set(Object.keys(mapping).map((path) => path.split('.')[0]));
    for (const [path, name] of Object.entries(mapping)) {
      const value = getPath(toolArguments, path);
      if (value !== undefined) canonical[name] = value;
    }
    for (const [key, value] of Object.entries(toolArguments)) {
      if (!mappedRoots.has(key) && !mappedTargets.has(key)) canonical[key] = value;
    }
  }
  for (const path of binding.ignoredArguments ?? []) removePath(canonical, path);
  if (binding.enumValues !== undefined) {
    for (const [name, values] of Object.entries(binding.enumValues))
      if (name in canonical) canonical[name] = mapEnum(canonical[name], values);
  }
  return canonical;
}

/** Drops a distractor argument that came through by name, copying objects on the way (the model's arguments stay as written). */
function removePath(target: Record<string, unknown>, path: string): void {
  const [head, ...rest] = path.split('.') as [string, ...string[]];
  if (!(head in target)) return;
  if (rest.length === 0) {
    delete target[head];
    return;
  }
  const child = target[head];
  if (child === null || typeof child !== 'object' || Array.isArray(child)) return;
  const copy = { ...(child as Record<string, unknown>) };
  removePath(copy, rest.join('.'));
  target[head] = copy;
}

/** The arguments to write for this tool to pass the given canonical arguments (the inverse mapping). */
export function toToolArguments(binding: ToolBinding, canonical: Record<string, unknown>): Record<string, unknown> {
  const inverse = binding.arguments !== undefined ? invert(binding.arguments) : {};
  const result: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(canonical)) {
    if (value === undefined) continue;
    const enumMapping = binding.enumValues?.[name];
    setPath(result, inverse[name] ?? name, enumMapping !== undefined ? mapEnum(value, invert(enumMapping)) : value);
  }
  return result;
}

/** How the tool spells a canonical argument (its path), for messages the model reads. */
export function toolArgumentLabel(binding: ToolBinding, canonicalName: string): string {
  if (binding.arguments === undefined) return canonicalName;
  for (const [path, name] of Object.entries(binding.arguments)) if (name === canonicalName) return path;
  return canonicalName;
}

/**
 * Whether the tool's parameters have a place for a canonical argument: the top-level property its
 * mapped path starts at. A harness may leave out an optional argument (a policy tool without
 * `item_id` answers for the featured item); a caller planning by capability then leaves it out too.
 */
export function toolTakesArgument(tool: ToolDefinition, canonicalName: string): boolean {
  const root = toolArgumentLabel(tool.binding, canonicalName).split('.')[0];
  const properties = tool.parameters.properties;
  return typeof properties === 'object' && properties !== null && Object.hasOwn(properties, root);
}

const toolIndexes = new WeakMap<Harness, Map<string, ToolDefinition>>();

/** The harness tool with this name (indexed once per harness object). */
export function findTool(harness: Harness, name: string): ToolDefinition | undefined {
  let index = toolIndexes.get(harness);
  if (index === undefined) {
    index = new Map(harness.tools.map((tool) => [tool.name, tool]));
    toolIndexes.set(harness, index);
  }
  return index.get(name);
}

/**
 * The harness tool bound to a capability, for callers that plan by capability (the scripted
 * expert, the verifier's notes). The first one wins; `visibleNames` limits the choice to tools
 * the model was actually shown.
 */
export function findToolByCapability(
  harness: Harness,
  capability: ToolCapability,
  visibleNames?: ReadonlySet<string>,
): ToolDefinition | undefined {
  return harness.tools.find(
    (tool) => tool.binding.capability === capability && (visibleNames === undefined || visibleNames.has(tool.name)),
  );
}
