import type { Harness, JsonSchema, ToolDefinition } from '../../harness/harness-types';

/**
 * A hand-made "HSA-style" variant of a harness for tests: every tool renamed, arguments renamed
 * or moved into nested objects, enum values respelled, with bindings that map them back to the
 * canonical arguments. The right behaviour under it is the same behaviour in other names, so
 * the simulator must give the same tool results and the expert the same reward.
 */
interface Rename {
  name: string;
  /** canonical argument -> tool path (dot path for nesting) */
  arguments?: Record<string, string>;
  /** canonical argument -> { canonical value: tool's spelling } */
  enums?: Record<string, Record<string, string>>;
}

export const renames: Record<string, Rename> = {
  get_item_detail: { name: 'fetch_goods_profile', arguments: { item_id: 'goods.id' } },
  search_items: {
    name: 'find_products',
    arguments: { query: 'keywords.text', category: 'keywords.kind' },
    enums: { category: { apparel: '服饰', beauty: '美妆', food: '食品', electronics: '数码', home: '家居' } },
  },
  get_sku_stock: {
    name: 'inventory_lookup',
    arguments: { item_id: 'product_id', size: 'spec_size', color: 'spec_color' },
  },
  get_promotions: { name: 'coupon_center', arguments: { item_id: 'product_id' } },
  get_after_sales_policy: {
    name: 'policy_lookup',
    arguments: { topic: 'subject', item_id: 'product_id' },
    enums: { topic: { shipping: 'logistics', returns: 'refund', warranty: 'repair', invoice: 'billing' } },
  },
  recommend_size: {
    name: 'size_advisor',
    arguments: { item_id: 'product_id', height_cm: 'body.height', weight_kg: 'body.weight' },
  },
  compare_items: { name: 'side_by_side', arguments: { item_ids: 'candidates' } },
  get_live_script: { name: 'show_rundown' },
  quote_final_price: {
    name: 'checkout_preview',
    arguments: { item_id: 'product_id', quantity: 'count', sku_id: 'variant_id' },
  },
};

function setSchemaAt(root: JsonSchema, path: string, schema: unknown, required: boolean): void {
  const segments = path.split('.');
  let node = root as { properties: Record<string, JsonSchema>; required?: string[] };
  for (const segment of segments.slice(0, -1)) {
    node.properties[segment] ??= { type: 'object', properties: {}, required: [], additionalProperties: false };
    if (required && !(node.required ?? []).includes(segment)) node.required = [...(node.required ?? []), segment];
    node = node.properties[segment] as typeof node;
  }
  const leaf = segments[segments.length - 1];
  node.properties[leaf] = schema as JsonSchema;
  if (required) node.required = [...(node.required ?? []), leaf];
}

function renameTool(tool: ToolDefinition): ToolDefinition {
  const rename = renames[tool.name];
  if (rename === undefined) return tool;
  const source = tool.parameters as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  const parameters: JsonSchema = { type: 'object', properties: {}, required: [], additionalProperties: false };
  const bindingArguments: Record<string, string> = {};
  const enumValues: Record<string, Record<string, string>> = {};
  for (const [canonical, schema] of Object.entries(source.properties ?? {})) {
    const path = rename.arguments?.[canonical] ?? canonical;
    const respell = rename.enums?.[canonical];
    let property: Record<string, unknown> = { ...schema };
    if (respell !== undefined && Array.isArray(schema.enum)) {
      property = { ...schema, enum: (schema.enum as string[]).map((value) => respell[value] ?? value) };
      enumValues[canonical] = Object.fromEntries(Object.entries(respell).map(([value, spelled]) => [spelled, value]));
    }
    setSchemaAt(parameters, path, property, (source.required ?? []).includes(canonical));
    if (path !== canonical) bindingArguments[path] = canonical;
  }
  return {
    name: rename.name,
    description: tool.description,
    parameters,
    binding: {
      capability: tool.binding.capability,
      ...(Object.keys(bindingArguments).length > 0 ? { arguments: bindingArguments } : {}),
      ...(Object.keys(enumValues).length > 0 ? { enumValues } : {}),
    },
  };
}

export function renameHarness(harness: Harness): Harness {
  const newName = (name: string) => renames[name]?.name ?? name;
  return {
    ...harness,
    id: `${harness.id}-renamed`,
    tools: harness.tools.map(renameTool),
    skills: harness.skills.map((skill) => ({ ...skill, tools: skill.tools.map(newName) })),
  };
}
