import { canonicalJson } from '../../hash/hash';
import { getPath } from '../tool-binding';
import { copyJsonKeepingFloats } from '../../text/python-values';
import { capabilityArguments, type JsonSchema, type ToolBinding, type ToolDefinition } from '../harness-types';

/**
 * A tool's parameters as a tree the tool_schemas family can rename, reorder, wrap and unwrap,
 * tracking where each *unit* (a path a capability argument is read from, or a parameter nothing
 * reads) ends up. From the tree come the variant's JSON Schema, its binding, and the path map
 * that rewrites recorded call arguments forward and back.
 */

export interface ParameterNode {
  name: string;
  /** The node's schema; for containers without `properties` and `required` (rebuilt from children). */
  schema: JsonSchema;
  required: boolean;
  /** Set for containers: objects whose properties hold units. */
  children?: ParameterNode[];
  /** Set for units: the unit's path in the source tool (stable across transforms). */
  sourcePath?: string;
  /** For units: the capability argument it feeds; null when nothing reads it (distractors). */
  argument?: string | null;
  /** For units: respelled enum values, source value -> variant value. */
  enumRespellings?: Record<string, string>;
  /** Keys of the container schema in their original order (so serialization keeps it). */
  keyOrder?: string[];
  /** Whether the container schema had a `required` list. */
  hadRequired?: boolean;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Builds the tree of a tool's parameters with the units its binding defines. */
export function parseParameters(tool: ToolDefinition): ParameterNode {
  const mapped = tool.binding.arguments ?? {};
  const ignored = new Set(tool.binding.ignoredArguments ?? []);
  const canonical: readonly string[] = capabilityArguments[tool.binding.capability];
  const walk = (schema: JsonSchema, name: string, required: boolean, prefix: string): ParameterNode => {
    const { properties, required: requiredList, ...rest } = schema;
    const requiredNames = Array.isArray(requiredList) ? (requiredList as string[]) : [];
    const children = Object.entries(isObject(properties) ? properties : {}).map(([childName, child]) => {
      const path = prefix === '' ? childName : `${prefix}.${childName}`;
      const childSchema = (isObject(child) ? child : {}) as JsonSchema;
      const childRequired = requiredNames.includes(childName);
      if (path in mapped) return unit(childName, childSchema, childRequired, path, mapped[path]);
      if (Object.keys(mapped).some((other) => other.startsWith(`${path}.`)) && isObject(childSchema.properties))
        return walk(childSchema, childName, childRequired, path);
      // A canonical name that some path maps onto is only read from that path (see toCanonicalArguments).
      const readAsItself =
        prefix === '' && !ignored.has(path) && canonical.includes(path) && !Object.values(mapped).includes(path);
      if (readAsItself) return unit(childName, childSchema, childRequired, path, path);
      return unit(childName, childSchema, childRequired, path, null);
    });
    return {
      name,
      schema: rest,
      required,
      children,
      keyOrder: Object.keys(schema),
      hadRequired: requiredList !== undefined,
    };
  };
  return walk(tool.parameters, '', true, '');
}

function unit(
  name: string,
  schema: JsonSchema,
  required: boolean,
  sourcePath: string,
  argument: string | null,
): ParameterNode {
  return { name, schema: copyJsonKeepingFloats(schema), required, sourcePath, argument };
}

/** Every unit with its current path, depth first in declaration order. */
export function unitsOf(root: ParameterNode): Array<{ node: ParameterNode; path: string }> {
  const result: Array<{ node: ParameterNode; path: string }> = [];
  const visit = (node: ParameterNode, prefix: string) => {
    for (const child of node.children ?? []) {
      const path = prefix === '' ? child.name : `${prefix}.${child.name}`;
      if (child.children !== undefined) visit(child, path);
      else result.push({ node: child, path });
    }
  };
  visit(root, '');
  return result;
}

/** Every node (containers and units) below the root. */
export function nodesOf(root: ParameterNode): ParameterNode[] {
  const result: ParameterNode[] = [];
  const visit = (node: ParameterNode) => {
    for (const child of node.children ?? []) {
      result.push(child);
      visit(child);
    }
  };
  visit(root);
  return result;
}

/** The JSON Schema of a tree (containers rebuilt, other keywords kept in their order). */
export function serializeParameters(node: ParameterNode): JsonSchema {
  if (node.children === undefined) return copyJsonKeepingFloats(node.schema);
  const properties: Record<string, JsonSchema> = {};
  for (const child of node.children) properties[child.name] = serializeParameters(child);
  const required = node.children.filter((child) => child.required).map((child) => child.name);
  const result: JsonSchema = {};
  const order = node.keyOrder ?? ['type', 'properties', 'required'];
  const keys = [...order, ...Object.keys(node.schema).filter((key) => !order.includes(key))];
  if (!keys.includes('properties')) keys.splice(keys.includes('type') ? keys.indexOf('type') + 1 : 0, 0, 'properties');
  if (required.length > 0 && !keys.includes('required')) keys.splice(keys.indexOf('properties') + 1, 0, 'required');
  for (const key of keys) {
    if (key === 'properties') result.properties = properties;
    else if (key === 'required') {
      if (required.length > 0 || node.hadRequired) result.required = required;
    } else if (key in node.schema) result[key] = copyJsonKeepingFloats(node.schema[key]);
  }
  return result;
}

/** The variant binding of a tree: explicit argument paths when any unit moved, enum respellings composed with the source's. */
export function bindingOf(root: ParameterNode, source: ToolBinding): ToolBinding {
  const binding: ToolBinding = { capability: source.capability };
  const units = unitsOf(root);
  const bound = units.filter(({ node }) => node.argument !== null && node.argument !== undefined);
  if (bound.some(({ node, path }) => path !== node.argument)) {
    binding.arguments = Object.fromEntries(bound.map(({ node, path }) => [path, node.argument as string]));
  }
  const enumValues: Record<string, Record<string, string>> = {};
  for (const { node } of bound) {
    const argument = node.argument as string;
    const sourceRespellings = source.enumValues?.[argument] ?? {};
    const values = new Set([
      ...enumValuesOf(node.schema),
      ...Object.keys(sourceRespellings),
      ...Object.keys(node.enumRespellings ?? {}),
    ]);
    for (const value of values) {
      const canonical = sourceRespellings[value] ?? value;
      const variantValue = node.enumRespellings?.[value] ?? value;
      if (variantValue !== canonical) (enumValues[argument] ??= {})[variantValue] = canonical;
    }
  }
  if (Object.keys(enumValues).length > 0) binding.enumValues = enumValues;
  const sourceIgnored = new Set(source.ignoredArguments ?? []);
  const ignored = units
    .filter(
      ({ node, path }) => node.argument === null && (!path.includes('.') || sourceIgnored.has(node.sourcePath ?? '')),
    )
    .map(({ path }) => path);
  if (ignored.length > 0) binding.ignoredArguments = ignored;
  return binding;
}

/** Enum values a unit's schema lists (its own `enum` or its array items'). */
export function enumValuesOf(schema: JsonSchema): string[] {
  const own = Array.isArray(schema.enum)
    ? schema.enum
    : isObject(schema.items) && Array.isArray(schema.items.enum)
      ? schema.items.enum
      : [];
  return own.filter((value): value is string => typeof value === 'string');
}

/** Maps every `description` string of a JSON Schema (nested properties, items, combinators). */
export function mapSchemaDescriptions(schema: JsonSchema, map: (text: string) => string): JsonSchema {
  const result: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'description' && typeof value === 'string') result[key] = map(value);
    else if (
      (key === 'properties' || key === '$defs' || key === 'definitions' || key === 'patternProperties') &&
      isObject(value)
    ) {
      result[key] = Object.fromEntries(
        Object.entries(value).map(([name, child]) => [
          name,
          isObject(child) ? mapSchemaDescriptions(child, map) : child,
        ]),
      );
    } else if (
      (key === 'items' || key === 'additionalProperties' || key === 'not' || key === 'contains') &&
      isObject(value)
    ) {
      result[key] = mapSchemaDescriptions(value, map);
    } else if (
      (key === 'anyOf' || key === 'oneOf' || key === 'allOf' || key === 'prefixItems') &&
      Array.isArray(value)
    ) {
      result[key] = value.map((child) => (isObject(child) ? mapSchemaDescriptions(child, map) : child));
    } else {
      result[key] = value;
    }
  }
  return result;
}

/** Every description string of a JSON Schema, for the leak check. */
export function schemaDescriptions(schema: JsonSchema): string[] {
  const found: string[] = [];
  mapSchemaDescriptions(schema, (text) => {
    found.push(text);
    return text;
  });
  return found;
}

/** How one tool's call arguments move between two harnesses: unit paths and enum respellings. */
export interface ArgumentMap {
  /** Source path -> target path of every unit. */
  paths: Record<string, string>;
  /** Source path -> { source value: target value }. */
  enumValues: Record<string, Record<string, string>>;
}

export function invertArgumentMap(map: ArgumentMap): ArgumentMap {
  const paths: Record<string, string> = {};
  const enumValues: Record<string, Record<string, string>> = {};
  for (const [from, to] of Object.entries(map.paths)) {
    paths[to] = from;
    const respellings = map.enumValues[from];
    if (respellings !== undefined)
      enumValues[to] = Object.fromEntries(Object.entries(respellings).map(([source, target]) => [target, source]));
  }
  return { paths, enumValues };
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const segments = path.split('.');
  let current = target;
  for (const segment of segments.slice(0, -1)) {
    const next = current[segment];
    if (!isObject(next)) current[segment] = {};
    current = current[segment] as Record<string, unknown>;
  }
  current[segments[segments.length - 1]] = value;
}

function respell(value: unknown, respellings: Record<string, string> | undefined): unknown {
  if (respellings === undefined) return value;
  if (typeof value === 'string') return respellings[value] ?? value;
  if (Array.isArray(value))
    return value.map((entry) => (typeof entry === 'string' ? (respellings[entry] ?? entry) : entry));
  return value;
}

/** A key of the arguments no unit covers (the call cannot be carried over), or undefined. */
function uncoveredKey(args: Record<string, unknown>, sources: Set<string>, prefix = ''): string | undefined {
  for (const [key, value] of Object.entries(args)) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (sources.has(path)) continue;
    const isContainer = [...sources].some((source) => source.startsWith(`${path}.`));
    if (isContainer && isObject(value)) {
      const inner = uncoveredKey(value, sources, path);
      if (inner !== undefined) return inner;
      continue;
    }
    return path;
  }
  return undefined;
}

export type MappedArguments = { ok: true; value: Record<string, unknown> } | { ok: false; reason: string };

/** Moves call arguments through a map: every value to its target path, enum values respelled. Fails on an argument no unit covers. */
export function mapArguments(args: Record<string, unknown>, map: ArgumentMap): MappedArguments {
  const sources = new Set(Object.keys(map.paths));
  const uncovered = uncoveredKey(args, sources);
  if (uncovered !== undefined)
    return { ok: false, reason: `argument ${JSON.stringify(uncovered)} is not a parameter of the tool` };
  const value: Record<string, unknown> = {};
  for (const [from, to] of Object.entries(map.paths)) {
    const found = getPath(args, from);
    if (found !== undefined) setPath(value, to, respell(structuredClone(found), map.enumValues[from]));
  }
  return { ok: true, value };
}

/** Deep equality of parsed JSON values (key order ignored). */
export function sameJson(left: unknown, right: unknown): boolean {
  return canonicalJson(left) === canonicalJson(right);
}
