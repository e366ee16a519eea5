import Ajv, { type ValidateFunction } from 'ajv';
import { plainJsonOf } from '../../text/python-values';
import type { Harness, ToolCapability, ToolDefinition } from '../../harness/harness-types';
import { canonicalJson } from '../../hash/hash';
import type { ToolCall } from '../../trajectory/messages';
import type { World } from '../world/world';
import { checkArguments } from './capability-arguments';
import { capabilityHandlers } from './capabilities';
import { findTool, toCanonicalArguments, toolArgumentLabel } from '../../harness/tool-binding';
import { ToolFailure, toolErrorContent, type ToolError, type ToolErrorCode } from './tool-error';

/** How a failed call is recorded in a trajectory's `issues`. */
export type ToolIssueKind = 'invalid_json' | 'unknown_tool' | 'schema_violation' | 'tool_error';

export interface ToolExecution {
  /** The tool message content the model reads: the result JSON, or `{"error": {...}}`. */
  content: string;
  error?: ToolError;
  /** Set when the call failed: which kind of trajectory issue it is. */
  issueKind?: ToolIssueKind;
  /** Simulated latency of the call, ms (deterministic: a function of the call). */
  durationMs: number;
  /** The capability the tool is bound to (when the tool exists). */
  capability?: ToolCapability;
  /** The arguments after binding translation (when they parsed). */
  canonicalArguments?: Record<string, unknown>;
}

/** A tool call as the model wrote it: OpenAI shape, or just a name and arguments. */
export type ToolCallInput = ToolCall | { name: string; arguments: string | Record<string, unknown> };

/** Typical latency of each capability's backend, ms; a call takes 70% to 130% of it. */
const baseLatencyMs: Record<ToolCapability, number> = {
  item_detail: 40,
  item_search: 90,
  sku_stock: 35,
  promotions: 45,
  policy: 30,
  size_recommendation: 25,
  item_comparison: 70,
  live_script: 20,
  price_quote: 55,
};
const errorLatencyMs = 8;

const ajv = new Ajv({ allErrors: true, strict: false });
const validators = new WeakMap<ToolDefinition, ValidateFunction | null>();

function validatorOf(tool: ToolDefinition): ValidateFunction | null {
  let validator = validators.get(tool);
  if (validator === undefined) {
    try {
      // Ajv reads numbers with typeof: a `1.0` kept as Python reads it (PythonFloat) is given as its number.
      validator = ajv.compile(plainJsonOf(tool.parameters));
    } catch {
      // The harness loader rejects invalid schemas; a hand-built harness with one is run unchecked.
      validator = null;
    }
    validators.set(tool, validator);
  }
  return validator;
}

/** FNV-1a: a cheap deterministic hash for latency jitter (not for anything secure). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function failed(
  code: ToolErrorCode,
  message: string,
  issueKind: ToolIssueKind,
  extra: Partial<ToolExecution> = {},
): ToolExecution {
  const error = { code, message };
  return { content: toolErrorContent(error), error, issueKind, durationMs: errorLatencyMs, ...extra };
}

/**
 * Runs a capability on canonical arguments (already translated from a tool's shape). Never
 * throws for bad arguments or references: returns the failure the model should read.
 */
export function executeCapability(
  world: World,
  capability: ToolCapability,
  canonical: Record<string, unknown>,
  labelOf?: (name: string) => string,
): Record<string, unknown> | ToolFailure {
  return checkArguments(capability, canonical, labelOf) ?? capabilityHandlers[capability](world, canonical);
}

/**
 * Executes one tool call through the harness: the name resolves to the harness's tool, the
 * arguments are parsed, checked against the tool's JSON Schema (ajv), translated through its
 * binding to the capability's canonical arguments and run against the world. Every failure
 * comes back as a tool error the model can read, with the issue kind to record.
 */
export function executeToolCall(world: World, harness: Harness, call: ToolCallInput): ToolExecution {
  const name = 'function' in call ? call.function.name : call.name;
  const rawArguments = 'function' in call ? call.function.arguments : call.arguments;
  const tool = findTool(harness, name);
  if (tool === undefined) {
    return failed(
      'UNKNOWN_TOOL',
      `no tool named ${JSON.stringify(name)}; available tools: ${harness.tools.map((entry) => entry.name).join(', ')}`,
      'unknown_tool',
    );
  }
  const capability = tool.binding.capability;
  let parsed: unknown;
  if (typeof rawArguments === 'string') {
    // Some servers send "" for a call without arguments; treat it as {}.
    if (rawArguments.trim() === '') {
      parsed = {};
    } else {
      try {
        parsed = JSON.parse(rawArguments);
      } catch (error) {
        return failed(
          'INVALID_JSON',
          `arguments of ${name} are not valid JSON (${(error as Error).message}); send one JSON object`,
          'invalid_json',
          { capability },
        );
      }
    }
  } else {
    parsed = rawArguments;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return failed('SCHEMA_VIOLATION', `arguments of ${name} must be a JSON object`, 'schema_violation', { capability });
  }
  const validator = validatorOf(tool);
  if (validator !== null && !validator(parsed)) {
    const details = (validator.errors ?? [])
      .map((entry) => `${entry.instancePath || '(arguments)'} ${entry.message ?? 'is invalid'}`)
      .join('; ');
    return failed(
      'SCHEMA_VIOLATION',
      `arguments of ${name} do not match its parameters: ${details}`,
      'schema_violation',
      { capability },
    );
  }
  const canonicalArguments = toCanonicalArguments(tool.binding, parsed as Record<string, unknown>);
  const result = executeCapability(world, capability, canonicalArguments, (argumentName) =>
    toolArgumentLabel(tool.binding, argumentName),
  );
  if (result instanceof ToolFailure) {
    return {
      content: toolErrorContent(result.error),
      error: result.error,
      issueKind: 'tool_error',
      durationMs: errorLatencyMs,
      capability,
      canonicalArguments,
    };
  }
  // Jitter from the canonical call, so the same call under a renamed harness takes as long.
  const jitter = (fnv1a(`${capability}|${canonicalJson(canonicalArguments)}`) % 61) / 100;
  return {
    content: JSON.stringify(result),
    durationMs: Math.round(baseLatencyMs[capability] * (0.7 + jitter)),
    capability,
    canonicalArguments,
  };
}
