import { capabilityArgumentEnums, type capabilityArguments, type ToolCapability } from '../../harness/harness-types';
import { toolFailure, type ToolFailure } from './tool-error';

/** One canonical argument of a capability. */
export interface ArgumentSpec {
  type: 'string' | 'number' | 'integer' | 'string_array';
  required?: boolean;
  enum?: readonly string[];
  /** Inclusive bounds for numbers; item counts for arrays. */
  min?: number;
  max?: number;
}

export type PolicyTopic = 'shipping' | 'returns' | 'warranty' | 'invoice';

type CapabilitySpecs = {
  [Capability in ToolCapability]: Record<(typeof capabilityArguments)[Capability][number], ArgumentSpec>;
};

/**
 * Types and bounds of the canonical arguments (`capabilityArguments` in harness-types names
 * them): what the simulator accepts after a harness tool's binding has mapped the model's
 * (possibly renamed, nested or respelled) arguments onto them.
 */
export const capabilityArgumentSpecs: CapabilitySpecs = {
  item_detail: { item_id: { type: 'string', required: true } },
  item_search: {
    query: { type: 'string', required: true },
    category: { type: 'string', enum: capabilityArgumentEnums.item_search?.category },
    max_price: { type: 'number', min: 0 },
    limit: { type: 'integer', min: 1, max: 20 },
  },
  sku_stock: { item_id: { type: 'string', required: true }, size: { type: 'string' }, color: { type: 'string' } },
  promotions: { item_id: { type: 'string' } },
  policy: {
    topic: { type: 'string', required: true, enum: capabilityArgumentEnums.policy?.topic },
    item_id: { type: 'string' },
  },
  size_recommendation: {
    item_id: { type: 'string', required: true },
    height_cm: { type: 'number', required: true, min: 80, max: 230 },
    weight_kg: { type: 'number', required: true, min: 20, max: 200 },
  },
  item_comparison: { item_ids: { type: 'string_array', required: true, min: 2, max: 4 } },
  live_script: {},
  price_quote: {
    item_id: { type: 'string', required: true },
    quantity: { type: 'integer', min: 1, max: 99 },
    sku_id: { type: 'string' },
  },
};

/**
 * Checks canonical arguments against the capability's specs. `labelOf` names an argument the way
 * the model's tool spells it, so the error message points at what the model wrote.
 */
export function checkArguments(
  capability: ToolCapability,
  canonical: Record<string, unknown>,
  labelOf: (name: string) => string = (name) => name,
): ToolFailure | undefined {
  for (const [name, spec] of Object.entries<ArgumentSpec>(capabilityArgumentSpecs[capability])) {
    const value = canonical[name];
    const label = labelOf(name);
    if (value === undefined || value === null) {
      if (spec.required) return toolFailure('MISSING_ARGUMENT', `missing required argument "${label}"`);
      continue;
    }
    const problem = typeProblem(spec, value);
    if (problem !== undefined) return toolFailure('INVALID_ARGUMENT', `argument "${label}" ${problem}`);
  }
  return undefined;
}

function typeProblem(spec: ArgumentSpec, value: unknown): string | undefined {
  switch (spec.type) {
    case 'string':
      if (typeof value !== 'string' || value.trim() === '')
        return `must be a non-empty string, got ${JSON.stringify(value)}`;
      if (spec.enum && !spec.enum.includes(value))
        return `must be one of ${spec.enum.join(', ')}, got ${JSON.stringify(value)}`;
      return undefined;
    case 'number':
    case 'integer':
      if (typeof value !== 'number' || !Number.isFinite(value)) return `must be a number, got ${JSON.stringify(value)}`;
      if (spec.type === 'integer' && !Number.isInteger(value)) return `must be a whole number, got ${value}`;
      if ((spec.min !== undefined && value < spec.min) || (spec.max !== undefined && value > spec.max))
        return `must be between ${spec.min ?? '-∞'} and ${spec.max ?? '∞'}, got ${value}`;
      return undefined;
    case 'string_array':
      if (!Array.isArray(value) || value.some((entry) => typeof entry !== 'string'))
        return `must be an array of strings, got ${JSON.stringify(value)}`;
      if ((spec.min !== undefined && value.length < spec.min) || (spec.max !== undefined && value.length > spec.max))
        return `must list ${spec.min} to ${spec.max} entries, got ${value.length}`;
      return undefined;
  }
}
