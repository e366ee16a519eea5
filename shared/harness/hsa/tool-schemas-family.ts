import type { Rng } from '../../random/rng';
import { toolNamePattern } from '../harness-schema';
import type { ToolDefinition } from '../harness-types';
import { paraphraseChinese } from './chinese-lexicon';
import { namingStyles, renameCandidates, styleName, type NameAllocator, type NamingStyle } from './name-allocator';
import type { TextRename } from './text-renamer';
import {
  bindingOf,
  enumValuesOf,
  mapSchemaDescriptions,
  nodesOf,
  parseParameters,
  serializeParameters,
  unitsOf,
  type ParameterNode,
} from './tool-layout';
import type { VariantBuilder } from './variant-builder';
import type { HsaOperator } from './hsa-operator';

/**
 * tool_schemas: renames tools and parameters (one style per variant, the same parameter name
 * renamed the same way in every tool), respells enum values, reorders properties, wraps
 * arguments in a nested object or unwraps nested ones, rewrites descriptions, and adds optional
 * distractor parameters and distractor tools. The variant bindings map every moved parameter
 * and respelled value back to the capability's canonical arguments, so the simulator executes a
 * rewritten call exactly as it executed the original.
 */

/** Parameter names must stay usable as dot-path segments and as JSON keys every server accepts. */
const parameterNamePattern = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const parameterStyles: readonly NamingStyle[] = [
  'snake',
  'camel',
  'synonym_snake',
  'synonym_camel',
  'opaque',
  'random',
];

/** Respellings that keep what an enum value means. */
const enumSynonyms: Record<string, readonly string[]> = {
  apparel: ['clothing', '服饰', 'APPAREL'],
  beauty: ['cosmetics', '美妆', 'BEAUTY'],
  food: ['grocery', '食品', 'FOOD'],
  electronics: ['digital', '数码', 'ELECTRONICS'],
  home: ['household', '家居', 'HOME'],
  shipping: ['delivery', '发货', 'SHIPPING'],
  returns: ['refund', '退换', 'RETURNS'],
  warranty: ['repair', '保修', 'WARRANTY'],
  invoice: ['billing', '发票', 'INVOICE'],
};
const enumStyles = ['synonym', 'chinese', 'upper', 'code'] as const;

interface DistractorParameter {
  name: string;
  schema: Record<string, unknown>;
}

const distractorParameters: readonly DistractorParameter[] = [
  { name: 'trace_id', schema: { type: 'string', description: '可选：调用链追踪ID，仅用于排查问题，不影响查询结果' } },
  { name: 'verbose', schema: { type: 'boolean', description: '可选：是否附带调试信息，不影响结果' } },
  { name: 'request_source', schema: { type: 'string', description: '可选：调用来源标记，例如 live_room，不影响结果' } },
  { name: 'locale', schema: { type: 'string', description: '可选：返回文本的语言，默认简体中文' } },
];

interface DistractorTool {
  name: string;
  description: string;
  parameter: DistractorParameter;
}

/** Tools a live room plausibly has that no task of the simulator needs; bound to the harmless live_script capability. */
const distractorTools: readonly DistractorTool[] = [
  {
    name: 'get_lottery_rules',
    description: '查询直播间抽奖活动的规则：参与方式、开奖时间和奖品。只在观众问抽奖、福袋时使用。',
    parameter: {
      name: 'round',
      schema: { type: 'integer', minimum: 1, description: '第几轮抽奖，不传则返回当前一轮' },
    },
  },
  {
    name: 'get_fan_club_benefits',
    description: '查询粉丝团等级和各等级的福利。只在观众问粉丝团、亲密度、灯牌时使用。',
    parameter: { name: 'level', schema: { type: 'integer', minimum: 1, maximum: 20, description: '粉丝团等级' } },
  },
  {
    name: 'get_stream_schedule',
    description: '查询本直播间接下来几天的开播预告。只在观众问下次什么时候开播时使用。',
    parameter: {
      name: 'days',
      schema: { type: 'integer', minimum: 1, maximum: 7, description: '查询未来几天，默认 3' },
    },
  },
];

const wrapperNames = ['params', 'args', 'filters', 'options', 'request', 'payload'];

export function applyToolSchemas(builder: VariantBuilder): void {
  const { harness, rng } = builder;
  if (harness.tools.length === 0) return;
  const toolStyle = rng.pick(namingStyles);
  const parameterStyle = rng.pick(parameterStyles);
  const renames: TextRename[] = [];
  const trees = new Map(harness.tools.map((tool) => [tool.name, parseParameters(tool)]));

  // Tool names: at least one tool renamed.
  const toolNames = builder.allocator((name) => toolNamePattern.test(name));
  const renameTool = harness.tools.map((tool) => rng.chance(0.8) && builder.renameable(tool.name));
  const renameable = harness.tools.flatMap((tool, index) => (builder.renameable(tool.name) ? [index] : []));
  if (!renameTool.includes(true) && renameable.length > 0) renameTool[rng.pick(renameable)] = true;
  const newToolNames = new Map<string, string>();
  harness.tools.forEach((tool, index) => {
    if (!renameTool[index]) {
      toolNames.reserve(tool.name);
      newToolNames.set(tool.name, tool.name);
      return;
    }
    const name = toolNames.allocate(renameCandidates(tool.name, toolStyle, 'tool', rng), () =>
      styleName(tool.name, 'opaque', 'tool', rng),
    );
    newToolNames.set(tool.name, name);
    renames.push({ from: tool.name, to: name, kind: 'tool', scope: 'entity' });
  });

  // Parameter names: one global rename per name, so text that mentions a parameter stays unambiguous.
  const parameterNames = builder.allocator((name) => parameterNamePattern.test(name));
  const segmentNames = [...new Set([...trees.values()].flatMap((tree) => nodesOf(tree).map((node) => node.name)))];
  const segmentRenames = new Map<string, string>();
  for (const name of segmentNames) {
    if (!rng.chance(0.6) || !builder.renameable(name)) continue;
    const renamed = parameterNames.allocate(renameCandidates(name, parameterStyle, 'parameter', rng), () =>
      styleName(name, 'random', 'parameter', rng),
    );
    segmentRenames.set(name, renamed);
    renames.push({ from: name, to: renamed, kind: 'parameter', scope: 'harness' });
  }
  for (const tree of trees.values())
    for (const node of nodesOf(tree)) node.name = segmentRenames.get(node.name) ?? node.name;

  // Enum values: respelled the same way wherever they occur.
  const enumRespellings = respellEnums(trees, builder, rng, renames);
  for (const tree of trees.values()) {
    for (const { node } of unitsOf(tree)) {
      const values = enumValuesOf(node.schema);
      if (values.length === 0 || !values.some((value) => enumRespellings.has(value))) continue;
      node.enumRespellings = Object.fromEntries(
        values
          .filter((value) => enumRespellings.has(value))
          .map((value) => [value, enumRespellings.get(value) as string]),
      );
      respellSchema(node.schema, enumRespellings);
    }
  }

  // Structure, per tool.
  const addedParameters: Record<string, string[]> = {};
  for (const tool of harness.tools) {
    const tree = trees.get(tool.name) as ParameterNode;
    const names = builder.allocator(
      (name) => parameterNamePattern.test(name),
      nodesOf(tree).map((node) => node.name),
    );
    if (rng.chance(0.4)) unwrapContainers(tree, names);
    if (rng.chance(0.25)) wrapArguments(tree, names, parameterStyle, rng);
    if (rng.chance(0.5)) shuffleChildren(tree, rng);
    if (rng.chance(0.25)) {
      const distractor = rng.pick(distractorParameters);
      const name = names.allocate(renameCandidates(distractor.name, parameterStyle, 'parameter', rng), () =>
        styleName(distractor.name, 'random', 'parameter', rng),
      );
      tree.children?.splice(rng.int(0, tree.children.length), 0, {
        name,
        schema: structuredClone(distractor.schema),
        required: false,
        argument: null,
        sourcePath: '',
      });
      (addedParameters[newToolNames.get(tool.name) as string] ??= []).push(name);
    }
  }

  const paraphrase = rng.chance(0.6);
  const protect = builder.protectedPhrases();
  const rewritten: ToolDefinition[] = harness.tools.map((tool) => {
    const tree = trees.get(tool.name) as ParameterNode;
    const name = newToolNames.get(tool.name) as string;
    builder.mapping.tools[tool.name] = {
      name,
      parameters: Object.fromEntries(
        unitsOf(tree)
          .filter(({ node }) => node.sourcePath !== '')
          .map(({ node, path }) => [node.sourcePath as string, path]),
      ),
      enumValues: Object.fromEntries(
        unitsOf(tree)
          .filter(({ node }) => node.enumRespellings !== undefined)
          .map(({ node }) => [node.sourcePath as string, node.enumRespellings as Record<string, string>]),
      ),
    };
    const rewrite = (text: string) => (paraphrase ? paraphraseChinese(text, rng, 0.5, protect) : text);
    return {
      name,
      description: rewrite(tool.description),
      parameters: mapSchemaDescriptions(serializeParameters(tree), rewrite),
      binding: bindingOf(tree, tool.binding),
    };
  });
  builder.mapping.addedParameters = addedParameters;

  // Distractor tools, placed after the real tool of their capability so "first tool of a capability" still finds the real one.
  const addedTools: ToolDefinition[] = [];
  if (rng.chance(0.4)) {
    for (const distractor of rng.sample(distractorTools, rng.int(1, 2))) {
      const name = toolNames.allocate(renameCandidates(distractor.name, toolStyle, 'tool', rng), () =>
        styleName(distractor.name, 'opaque', 'tool', rng),
      );
      const parameterName = parameterNames.allocate(
        renameCandidates(distractor.parameter.name, parameterStyle, 'parameter', rng),
        () => styleName(distractor.parameter.name, 'random', 'parameter', rng),
      );
      addedTools.push({
        name,
        description: distractor.description,
        parameters: {
          type: 'object',
          properties: { [parameterName]: structuredClone(distractor.parameter.schema) },
          additionalProperties: false,
        },
        binding: { capability: 'live_script', ignoredArguments: [parameterName] },
      });
      builder.mapping.addedTools.push(name);
    }
  }
  let order = [...rewritten, ...addedTools];
  if (rng.chance(0.5)) order = rng.shuffle(order);
  harness.tools = realToolsFirst(order, new Set(builder.mapping.addedTools));

  for (const skill of harness.skills) skill.tools = skill.tools.map((name) => newToolNames.get(name) ?? name);
  builder.rename(renames);
  builder.markFamily('tool_schemas');
}

function respellEnums(
  trees: Map<string, ParameterNode>,
  builder: VariantBuilder,
  rng: Rng,
  renames: TextRename[],
): Map<string, string> {
  const respellings = new Map<string, string>();
  const enumSets = new Map<string, string[]>();
  for (const tree of trees.values()) {
    for (const { node } of unitsOf(tree)) {
      if (node.argument === null || node.argument === undefined) continue;
      const values = enumValuesOf(node.schema);
      if (values.length > 0) enumSets.set(values.join('\u0000'), values);
    }
  }
  const allocator = builder.allocator();
  for (const values of enumSets.values()) {
    if (!rng.chance(0.5) || values.some((value) => respellings.has(value) || !builder.renameable(value))) continue;
    const style = rng.pick(enumStyles);
    values.forEach((value, index) => {
      const known = enumSynonyms[value];
      const preferred =
        style === 'synonym' && known
          ? known[0]
          : style === 'chinese' && known
            ? known[1]
            : style === 'upper'
              ? value.toUpperCase()
              : `opt_${index + 1}_${value.slice(0, 3).toLowerCase()}`;
      const respelled = allocator.allocate(
        [preferred, ...(known ?? []), value.toUpperCase()],
        () => `opt_${rng.int(100, 999)}`,
      );
      respellings.set(value, respelled);
      renames.push({ from: value, to: respelled, kind: 'enum_value', scope: 'harness' });
    });
  }
  return respellings;
}

function respellSchema(schema: Record<string, unknown>, respellings: Map<string, string>): void {
  const respell = (value: unknown) => (typeof value === 'string' ? (respellings.get(value) ?? value) : value);
  if (Array.isArray(schema.enum)) schema.enum = schema.enum.map(respell);
  if (schema.default !== undefined)
    schema.default = Array.isArray(schema.default) ? schema.default.map(respell) : respell(schema.default);
  const items = schema.items as Record<string, unknown> | undefined;
  if (items && typeof items === 'object' && Array.isArray(items.enum)) items.enum = items.enum.map(respell);
}

/** Moves the children of top-level containers up a level (names that would collide are renamed). */
function unwrapContainers(root: ParameterNode, names: NameAllocator): void {
  const children: ParameterNode[] = [];
  for (const child of root.children ?? []) {
    if (child.children === undefined) {
      children.push(child);
      continue;
    }
    for (const grandchild of child.children) {
      const clash =
        (root.children ?? []).some((other) => other !== child && other.name === grandchild.name) ||
        children.some((other) => other.name === grandchild.name);
      if (clash)
        grandchild.name = names.allocate(
          [`${child.name}_${grandchild.name}`],
          () => `${grandchild.name}_${children.length}`,
        );
      children.push({ ...grandchild, required: child.required && grandchild.required });
    }
  }
  root.children = children;
}

/** Wraps some top-level arguments (all, or a random subset) in one object parameter. */
function wrapArguments(root: ParameterNode, names: NameAllocator, style: NamingStyle, rng: Rng): void {
  const children = root.children ?? [];
  // Only what a capability reads is wrapped: an object of ignored parameters would itself be a parameter nothing reads.
  const readable = children.filter((child) =>
    unitsOf({ ...child, children: child.children ?? [child] }).some(
      ({ node }) => node.argument !== null && node.argument !== undefined,
    ),
  );
  if (readable.length === 0) return;
  const count = rng.chance(0.5) ? readable.length : rng.int(1, readable.length);
  const chosen = new Set(rng.sample(readable, count));
  const base = rng.pick(wrapperNames);
  const name = names.allocate(
    [
      styleName(base, style === 'random' || style === 'opaque' ? 'snake' : style, 'parameter', rng),
      base,
      `${base}_obj`,
    ],
    () => `wrap_${rng.int(100, 999)}`,
  );
  const wrapped = children.filter((child) => chosen.has(child));
  const wrapper: ParameterNode = {
    name,
    schema: { type: 'object', description: '调用参数', additionalProperties: false },
    required: wrapped.some((child) => child.required),
    children: wrapped,
    keyOrder: ['type', 'description', 'properties', 'required', 'additionalProperties'],
    hadRequired: false,
  };
  const position = children.findIndex((child) => chosen.has(child));
  const rest = children.filter((child) => !chosen.has(child));
  rest.splice(position, 0, wrapper);
  root.children = rest;
}

function shuffleChildren(node: ParameterNode, rng: Rng): void {
  if (node.children === undefined) return;
  node.children = rng.shuffle(node.children);
  for (const child of node.children) shuffleChildren(child, rng);
}

/** Keeps each capability's first tool a real one (callers that pick a tool by capability take the first). */
function realToolsFirst(tools: ToolDefinition[], added: Set<string>): ToolDefinition[] {
  const result = [...tools];
  for (const tool of tools) {
    if (!added.has(tool.name)) continue;
    const real = result.findIndex(
      (other) => !added.has(other.name) && other.binding.capability === tool.binding.capability,
    );
    const index = result.indexOf(tool);
    if (real > index) {
      result.splice(index, 1);
      result.splice(real, 0, tool);
    }
  }
  return result;
}

/** The tool_schemas family as an entry of the operator table (hsa-operators.ts). */
export const toolSchemasOperator: HsaOperator = {
  family: 'tool_schemas',
  summary:
    'tool and parameter renames, property order, descriptions, distractor parameters and tools, nested wrapping, enum respelling',
  applyRank: 0,
  defaultWeight: 0.6,
  apply: applyToolSchemas,
};
