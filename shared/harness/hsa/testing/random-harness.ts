import { Rng } from '../../../random/rng';
import type { AssistantMessage, ToolCall } from '../../../trajectory/messages';
import type { Trajectory } from '../../../trajectory/trajectory';
import {
  capabilityArgumentEnums,
  capabilityArguments,
  type Harness,
  type HookDefinition,
  type JsonSchema,
  type PromptFormat,
  type PromptSection,
  type Skill,
  type ToolCapability,
  type ToolDefinition,
} from '../../harness-types';
import type { RenderContext } from '../../render';
import { getPath } from '../../tool-binding';
import { rebuildTimeline, type Timeline, type TimelineEntry } from '../trajectory-timeline';
import { parseParameters, unitsOf } from '../tool-layout';

/**
 * Random valid harnesses and trajectories recorded under them, for property tests of HSA (and
 * its benchmark): tools of any capability with arguments plain, renamed, nested in objects or
 * respelled, unread nested siblings and ignored parameters; skills and hooks whose text mentions
 * tools, parameters, enum values and each other by name; trajectories with parallel calls,
 * results that echo tool names, errors that name arguments, and replies. The shape comes from
 * the caller (a fast-check record), the details from a seeded generator.
 */

export type ArgumentLayout = 'plain' | 'renamed' | 'nested' | 'absent';

export interface RandomToolShape {
  capability: ToolCapability;
  /** Layout of the capability's arguments, in capabilityArguments order (extra entries unused). */
  layouts: ArgumentLayout[];
  /** Add a parameter the binding ignores. */
  ignored: boolean;
  /** Add an unread sibling inside a nested object. */
  unread: boolean;
  /** Respell enum values in the tool (binding.enumValues). */
  respell: boolean;
}

export interface RandomHarnessShape {
  tools: RandomToolShape[];
  skills: number;
  hooks: Array<HookDefinition['constraint']['type']>;
  format: PromptFormat;
  seed: string;
}

const words = [
  'alpha',
  'query',
  'text',
  'lookup',
  'count',
  'mode',
  'target',
  'filter',
  'spec',
  'code',
  'value',
  'id',
  'ids',
  'size',
  'item',
  'name',
  'kind',
  'shop',
  'deal',
  'rank',
  'note',
  'view',
];
const chinesePhrases = [
  '商品答疑',
  '尺码建议',
  '到手价计算',
  '售后',
  '闲聊',
  '营销促单',
  '合规表达',
  '库存查询',
  '优惠说明',
];
const fillers = [
  '先确认观众的问题',
  '结果以工具为准',
  '不要猜测',
  '回答要简短',
  '请告知观众',
  '例如直接说结论',
  '如果查不到就如实说',
];

function identifier(rng: Rng, taken: Set<string>): string {
  for (;;) {
    const parts = [rng.pick(words), ...(rng.chance(0.6) ? [rng.pick(words)] : [])];
    const name = rng.chance(0.3)
      ? parts.map((part, index) => (index === 0 ? part : part[0].toUpperCase() + part.slice(1))).join('')
      : parts.join('_');
    const candidate = taken.has(name) ? `${name}_${rng.int(2, 99)}` : name;
    if (!taken.has(candidate)) {
      taken.add(candidate);
      return candidate;
    }
  }
}

function argumentSchema(
  capability: ToolCapability,
  argument: string,
  rng: Rng,
  respell: boolean,
): { schema: JsonSchema; respellings?: Record<string, string> } {
  const enumValues = capabilityArgumentEnums[capability]?.[argument];
  if (enumValues) {
    if (!respell)
      return { schema: { type: 'string', enum: [...enumValues], description: `可选值：${enumValues.join('、')}` } };
    const respellings = Object.fromEntries(
      enumValues.map((value, index) => [`${value}_${index}${rng.pick(['x', 'y', 'z'])}`, value]),
    );
    return {
      schema: {
        type: 'string',
        enum: Object.keys(respellings),
        description: `取值 ${Object.keys(respellings).join(' ')}`,
      },
      respellings,
    };
  }
  switch (argument) {
    case 'max_price':
    case 'height_cm':
    case 'weight_kg':
      return { schema: { type: 'number', minimum: 1, maximum: 300, description: `${argument} 的数值` } };
    case 'limit':
    case 'quantity':
      return { schema: { type: 'integer', minimum: 1, maximum: 10 } };
    case 'item_ids':
      return {
        schema: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3, description: '商品ID列表' },
      };
    default:
      return {
        schema: { type: 'string', description: rng.chance(0.5) ? `${argument}：${rng.pick(fillers)}` : '字符串' },
      };
  }
}

function randomTool(shape: RandomToolShape, rng: Rng, names: Set<string>): ToolDefinition {
  const name = identifier(rng, names);
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const mapped: Record<string, string> = {};
  const enumValues: Record<string, Record<string, string>> = {};
  const ignored: string[] = [];
  const local = new Set<string>([...capabilityArguments[shape.capability]]);
  const containers = new Map<string, { properties: Record<string, JsonSchema>; required: string[] }>();
  capabilityArguments[shape.capability].forEach((argument, index) => {
    const layout = shape.layouts[index] ?? 'plain';
    if (layout === 'absent') return;
    const { schema, respellings } = argumentSchema(shape.capability, argument, rng, shape.respell);
    if (respellings) enumValues[argument] = respellings;
    const isRequired = rng.chance(0.5);
    if (layout === 'plain') {
      properties[argument] = schema;
      if (isRequired) required.push(argument);
    } else if (layout === 'renamed') {
      const renamed = identifier(rng, local);
      properties[renamed] = schema;
      mapped[renamed] = argument;
      if (isRequired) required.push(renamed);
    } else {
      const containerName =
        containers.size > 0 && rng.chance(0.5) ? rng.pick([...containers.keys()]) : identifier(rng, local);
      const container = containers.get(containerName) ?? { properties: {}, required: [] };
      containers.set(containerName, container);
      const child = identifier(rng, local);
      container.properties[child] = schema;
      if (isRequired) container.required.push(child);
      mapped[`${containerName}.${child}`] = argument;
    }
  });
  for (const [containerName, container] of containers) {
    if (shape.unread) container.properties[identifier(rng, local)] = { type: 'string', description: '备注' };
    properties[containerName] = {
      type: 'object',
      properties: container.properties,
      ...(container.required.length > 0 ? { required: container.required } : {}),
      additionalProperties: false,
    };
    if (container.required.length > 0) required.push(containerName);
  }
  if (shape.ignored) {
    const extra = identifier(rng, local);
    properties[extra] = { type: 'boolean', description: '调试开关' };
    ignored.push(extra);
  }
  const tool: ToolDefinition = {
    name,
    description: `工具 ${name}：${rng.pick(fillers)}`,
    parameters: {
      type: 'object',
      properties,
      ...(required.length > 0 ? { required } : {}),
      additionalProperties: false,
    },
    binding: { capability: shape.capability },
  };
  if (Object.keys(mapped).length > 0) tool.binding.arguments = mapped;
  if (Object.keys(enumValues).length > 0) tool.binding.enumValues = enumValues;
  if (ignored.length > 0) tool.binding.ignoredArguments = ignored;
  return tool;
}

/** Free text that mentions some of the given names among filler phrases. */
function mentioning(rng: Rng, names: string[], count: number): string {
  const parts: string[] = [];
  for (let index = 0; index < count; index++) {
    parts.push(rng.pick(fillers));
    if (names.length > 0 && rng.chance(0.7))
      parts.push(rng.chance(0.5) ? `用 ${rng.pick(names)} 查询` : `（见"${rng.pick(names)}"）`);
  }
  return `${parts.join('，')}。`;
}

const hookTexts: Record<HookDefinition['constraint']['type'], string> = {
  max_chars: '回复不超过{value}个字。',
  must_mention: '请提到"{value}"。',
  banned_terms: '不得出现{value}等说法。',
  tone: '称呼观众用{value}。',
  none: '工具结果已返回，请只说结果里有的内容。',
};

/** A valid harness of the given shape. */
export function randomHarness(shape: RandomHarnessShape): Harness {
  const rng = new Rng(shape.seed);
  const names = new Set<string>();
  const tools = shape.tools.map((tool) => randomTool(tool, rng.fork(`tool-${names.size}`), names));
  // Mention tools, their parameters and enum values in text, as real harnesses do.
  const parameterNames = tools.flatMap((tool) =>
    unitsOf(parseParameters(tool)).map(({ path }) => path.split('.').pop() as string),
  );
  const enumNames = tools.flatMap((tool) =>
    unitsOf(parseParameters(tool)).flatMap(({ node }) =>
      Array.isArray(node.schema.enum) ? (node.schema.enum as string[]) : [],
    ),
  );
  const mentionable = [...tools.map((tool) => tool.name), ...parameterNames, ...enumNames];
  const skills: Skill[] = [];
  for (let index = 0; index < shape.skills; index++) {
    const id = identifier(rng, names);
    const name = chinesePhrases[index % chinesePhrases.length];
    skills.push({
      id,
      name,
      description: mentioning(rng, mentionable, 1),
      tools: rng.sample(
        tools.map((tool) => tool.name),
        rng.int(0, tools.length),
      ),
      body: '',
    });
  }
  const skillMentions = [...skills.map((skill) => skill.id), ...skills.map((skill) => skill.name)];
  for (const skill of skills) {
    const lines = Array.from(
      { length: rng.int(1, 4) },
      (_, line) => `${line + 1}. ${mentioning(rng, [...mentionable, ...skillMentions], 2)}`,
    );
    skill.body = lines.join('\n');
  }
  const hooks: HookDefinition[] = shape.hooks.map((type, index) => {
    const constraint: HookDefinition['constraint'] =
      type === 'max_chars'
        ? { type, value: rng.int(20, 120) }
        : type === 'must_mention'
          ? { type, target: rng.pick(['active_coupon', 'featured_item', 'campaign'] as const) }
          : type === 'banned_terms'
            ? { type, terms: ['最好', '第一'] }
            : type === 'tone'
              ? { type, markers: ['宝宝们', '亲'] }
              : { type };
    const slots: Array<Pick<HookDefinition, 'event' | 'placement'>> = [
      { event: 'session_start', placement: 'system_prompt' },
      { event: 'session_start', placement: 'system_message' },
      { event: 'before_reply', placement: 'user_suffix' },
      { event: 'user_message', placement: 'system_message' },
      ...(type === 'none' ? [{ event: 'after_tool_result' as const, placement: 'system_message' as const }] : []),
    ];
    const slot = rng.pick(slots);
    const hook: HookDefinition = {
      id: `hook_${index}_${identifier(rng, names)}`,
      event: slot.event,
      placement: slot.placement,
      when: 'always',
      text: hookTexts[type],
      constraint,
    };
    if (skills.length > 0 && rng.chance(0.5))
      hook.skills = rng.sample(
        skills.map((skill) => skill.id),
        rng.int(1, skills.length),
      );
    return hook;
  });
  const sections: PromptSection[] = [
    { id: 'persona', kind: 'persona', title: '你是谁', content: `你是主播小桃。${mentioning(rng, mentionable, 1)}` },
    { id: 'rules', kind: 'rules', title: '基本规则', content: mentioning(rng, [...mentionable, ...skillMentions], 2) },
    ...(skills.length > 0
      ? [{ id: 'skills', kind: 'skills' as const, title: '技能', content: '按技能说明操作。' }]
      : []),
    { id: 'tools_guide', kind: 'tools_guide', title: '工具使用', content: '先查再答：' },
    { id: 'constraints', kind: 'constraints', title: '必须遵守的约束', content: '以下约束优先：' },
    { id: 'room_context', kind: 'room_context', title: '直播间实时信息', content: '' },
  ];
  return {
    id: `random-${shape.seed.length}`,
    version: '1',
    persona: { name: '小桃', style: '活泼' },
    prompt: { format: shape.format, sections: rng.shuffle(sections) },
    skills,
    tools,
    hooks,
  };
}

/** A value valid under a unit's schema. */
function valueFor(schema: JsonSchema, rng: Rng): unknown {
  if (Array.isArray(schema.enum)) return rng.pick(schema.enum as unknown[]);
  switch (schema.type) {
    case 'number':
      return rng.int(Number(schema.minimum ?? 0), Number(schema.maximum ?? 100) - 1) + 0.5;
    case 'integer':
      return rng.int(Number(schema.minimum ?? 0), Number(schema.maximum ?? 100));
    case 'boolean':
      return rng.chance(0.5);
    case 'array':
      return Array.from(
        { length: rng.int(Number(schema.minItems ?? 1), Number(schema.maxItems ?? 3)) },
        (_, index) => `IT${index}${rng.int(100, 999)}`,
      );
    default:
      return rng.pick(['IT-1001', '连衣裙', 'M', '雾霾蓝', 'query text']);
  }
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const segments = path.split('.');
  let current = target;
  for (const segment of segments.slice(0, -1)) current = (current[segment] ??= {}) as Record<string, unknown>;
  current[segments[segments.length - 1]] = value;
}

/** Arguments valid under a tool's schema: every required unit, some optional ones. */
export function randomArguments(tool: ToolDefinition, rng: Rng): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  const requiredPaths = new Set<string>();
  const collectRequired = (schema: JsonSchema, prefix: string, parentRequired: boolean) => {
    const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
    for (const [name, child] of Object.entries(properties)) {
      const path = prefix === '' ? name : `${prefix}.${name}`;
      const isRequired = parentRequired && required.includes(name);
      if (isRequired) requiredPaths.add(path);
      collectRequired(child, path, isRequired);
    }
  };
  collectRequired(tool.parameters, '', true);
  for (const { node, path } of unitsOf(parseParameters(tool))) {
    if (requiredPaths.has(path) || rng.chance(0.5)) setPath(args, path, valueFor(node.schema, rng));
  }
  // A container the schema requires must be present even when all its members are optional.
  for (const path of requiredPaths) if (getPath(args, path) === undefined) setPath(args, path, {});
  return args;
}

/** The room a random trajectory plays in. */
export const randomRoomContext: RenderContext = {
  campaignActive: true,
  activeCoupon: '满300减50',
  featuredItem: '冰丝阔腿裤',
  campaign: '春季上新',
  roomContext: '直播间ID：R1；正在讲解：冰丝阔腿裤（item_id: IT-1001）',
};

/** A trajectory recorded under `harness`: random turns, parallel calls, results (some echo tool names, some are argument errors) and replies. */
export function randomTrajectory(
  harness: Harness,
  seed: string,
  context: RenderContext = randomRoomContext,
): Trajectory {
  const rng = new Rng(seed);
  const entries: TimelineEntry[] = [];
  let sourceIndex = 0;
  const turns = rng.int(1, 2);
  for (let turn = 0; turn < turns; turn++) {
    entries.push({ kind: 'user', text: rng.pick(['这个多少钱', '有M码吗', '怎么退货', '你好呀']), turn });
    const steps = harness.tools.length === 0 ? 0 : rng.int(0, 2);
    for (let step = 0; step < steps; step++) {
      const calls: ToolCall[] = Array.from({ length: rng.int(1, 3) }, (_, index) => {
        const tool = rng.pick(harness.tools);
        return {
          id: `call-${turn}-${step}-${index}`,
          type: 'function',
          function: { name: tool.name, arguments: JSON.stringify(randomArguments(tool, rng)) },
        };
      });
      entries.push({
        kind: 'assistant',
        message: { role: 'assistant', content: null, tool_calls: calls },
        sourceIndex: sourceIndex++,
      });
      calls.forEach((call, index) => {
        const tool = harness.tools.find((candidate) => candidate.name === call.function.name) as ToolDefinition;
        // Tool errors name a bound argument by its path in the tool (how the simulator labels it).
        const argument = unitsOf(parseParameters(tool)).find(({ node }) => node.argument !== null)?.path;
        const content =
          argument !== undefined && rng.chance(0.2)
            ? JSON.stringify({
                error: { code: 'MISSING_ARGUMENT', message: `missing required argument "${argument}"` },
              })
            : JSON.stringify({ source: call.function.name, item_id: 'IT-1001', price: 199, note: '有货' });
        entries.push({
          kind: 'tool',
          toolCallId: call.id,
          content,
          sourceIndex: sourceIndex++,
          lastOfBatch: index === calls.length - 1,
        });
      });
    }
    const mention = harness.tools.length > 0 && rng.chance(0.2) ? `（${rng.pick(harness.tools).name}）` : '';
    const reply: AssistantMessage = { role: 'assistant', content: `宝宝们，这款到手价199元哦${mention}` };
    entries.push({ kind: 'assistant', message: reply, sourceIndex: sourceIndex++ });
  }
  const timeline: Timeline = { entries };
  const { messages } = rebuildTimeline(timeline, harness, context);
  return {
    schemaVersion: 1,
    id: `traj-random-${seed}`,
    taskId: `task-${seed}`,
    category: 'price',
    messages,
    tools: [],
    harness: { id: harness.id, version: harness.version, hash: 'random' },
    model: { provider: 'test', id: 'random', sampling: {}, simulated: true },
    calls: [],
    issues: [],
    status: 'ok',
    reward: { total: 1, components: {}, notes: [] },
    sampleIndex: 0,
    meta: {},
  };
}
