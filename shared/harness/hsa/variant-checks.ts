import Ajv, { type ValidateFunction } from 'ajv';
import { plainJsonOf } from '../../text/python-values';
import { canonicalJson } from '../../hash/hash';
import type { Trajectory } from '../../trajectory/trajectory';
import type { Harness } from '../harness-types';
import { activeConstraints, type RenderContext } from '../render';
import type { RewrittenCall } from './rewrite-trajectory';
import { TextRenamer, type Leak } from './text-renamer';
import {
  enumValuesOf,
  invertArgumentMap,
  mapArguments,
  nodesOf,
  parseParameters,
  sameJson,
  type ArgumentMap,
} from './tool-layout';
import { harnessTexts } from './variant-builder';
import type { VariantMapping } from './variant-mapping';

/**
 * The guarantees every emitted variant trajectory passes (a failing one is dropped and counted,
 * never emitted): the rewritten calls map back to exactly the recorded calls, they validate
 * against the variant's schemas, no renamed name is left in anything the model sees, and a
 * changed constraint is still met by the recorded replies. The replay check (executing the
 * calls in the simulator) lives with the augment stage, which has the tasks.
 */

export interface CheckFailure {
  detail: string;
}

type InverseTables = Map<string, { canonical: string; inverse: ArgumentMap }>;
const inverseTables = new WeakMap<VariantMapping, InverseTables>();

/** Variant tool name -> canonical tool and inverse argument map, built from the mapping record alone (once per mapping). */
function inverseTablesOf(mapping: VariantMapping): InverseTables {
  let tables = inverseTables.get(mapping);
  if (tables === undefined) {
    tables = new Map(
      Object.entries(mapping.tools).map(([canonical, entry]) => [
        entry.name,
        { canonical, inverse: invertArgumentMap({ paths: entry.parameters, enumValues: entry.enumValues }) },
      ]),
    );
    inverseTables.set(mapping, tables);
  }
  return tables;
}

/** Maps every rewritten call back through the inverse of the recorded mapping and compares with the recorded call. */
export function checkRoundTrip(calls: readonly RewrittenCall[], mapping: VariantMapping): CheckFailure | undefined {
  const canonicalByVariant = inverseTablesOf(mapping);
  for (const call of calls) {
    const back = canonicalByVariant.get(call.rewritten.function.name);
    if (back === undefined || back.canonical !== call.original.function.name) {
      return {
        detail: `call ${call.original.id}: ${call.rewritten.function.name} maps back to ${back?.canonical ?? 'no tool'}, recorded ${call.original.function.name}`,
      };
    }
    // The parsed forms of what was recorded and what is emitted (the rewrite serialized variantArguments as-is).
    const mapped = mapArguments(call.variantArguments, back.inverse);
    if (!mapped.ok) return { detail: `call ${call.original.id}: ${mapped.reason}` };
    if (!sameJson(mapped.value, call.originalArguments))
      return {
        detail: `call ${call.original.id}: maps back to ${canonicalJson(mapped.value)}, recorded ${canonicalJson(call.originalArguments)}`,
      };
  }
  return undefined;
}

/** Strict compile settings like the harness loader's, but formats unchecked: this validates values, not schemas. */
const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false });
const validators = new Map<string, ValidateFunction>();
const VALIDATORS_LIMIT = 4096;
/** By schema object: a variant's tools are checked once per trajectory, and hashing the schema each time would cost more than validating. */
const validatorsBySchema = new WeakMap<object, ValidateFunction>();

function validatorFor(schema: Record<string, unknown>): ValidateFunction {
  const known = validatorsBySchema.get(schema);
  if (known !== undefined) return known;
  // Equal schemas of different variants share one compiled validator.
  const key = canonicalJson(schema);
  let validator = validators.get(key);
  if (validator === undefined) {
    // Ajv reads numbers with typeof: a `1.0` kept as Python reads it (PythonFloat) is given as its number.
    const plain = plainJsonOf(schema);
    validator = ajv.compile(plain);
    // Ajv keeps compiled schemas by object; the key map is what we look up by.
    ajv.removeSchema(plain);
    if (validators.size >= VALIDATORS_LIMIT) validators.delete(validators.keys().next().value as string);
    validators.set(key, validator);
  }
  validatorsBySchema.set(schema, validator);
  return validator;
}

/** Compiles the validators of a variant's tools ahead of use (a worker prepares its variants once). */
export function compileToolValidators(harness: Harness): void {
  for (const tool of harness.tools) validatorFor(tool.parameters);
}

/** Every rewritten call's arguments against the variant tool's JSON Schema (ajv). */
export function checkSchemas(calls: readonly RewrittenCall[]): CheckFailure | undefined {
  for (const call of calls) {
    const validate = validatorFor(call.variantTool.parameters);
    if (!validate(call.variantArguments)) {
      const errors = (validate.errors ?? [])
        .map((error) => `${error.instancePath || '(arguments)'} ${error.message ?? 'is invalid'}`)
        .join('; ');
      return { detail: `call ${call.rewritten.id} (${call.rewritten.function.name}): ${errors}` };
    }
  }
  return undefined;
}

/**
 * Renamed names still present in a variant harness: in every free text (renamed names of all
 * kinds, matched at identifier boundaries) and among its names (tools, parameters, enum values,
 * skills, sections, hooks). Depends on the variant only: compute it once per variant.
 */
export function findHarnessLeaks(harness: Harness, mapping: VariantMapping): Leak[] {
  const renamer = new TextRenamer(mapping.renames);
  const leaks: Leak[] = [];
  for (const { where, text } of harnessTexts(harness)) leaks.push(...renamer.findLeaks(text, where));
  const renamed = new Map(mapping.renames.map((rename) => [rename.from, rename]));
  const checkName = (name: string, where: string) => {
    const rename = renamed.get(name);
    if (rename !== undefined) leaks.push({ name, kind: rename.kind, where });
  };
  for (const tool of harness.tools) {
    checkName(tool.name, `tools/${tool.name}.json name`);
    for (const node of nodesOf(parseParameters(tool))) {
      checkName(node.name, `tools/${tool.name}.json parameter ${node.name}`);
      for (const value of enumValuesOf(node.schema))
        checkName(value, `tools/${tool.name}.json parameter ${node.name} enum`);
    }
  }
  for (const skill of harness.skills) {
    checkName(skill.id, `skills/${skill.id}.md id`);
    for (const tool of skill.tools) checkName(tool, `skills/${skill.id}.md tools`);
  }
  for (const section of harness.prompt.sections) checkName(section.id, `harness.yaml prompt.sections.${section.id}.id`);
  for (const hook of harness.hooks) {
    checkName(hook.id, `harness.yaml hooks.${hook.id}.id`);
    for (const skill of hook.skills ?? []) checkName(skill, `harness.yaml hooks.${hook.id}.skills`);
  }
  return leaks;
}

/**
 * Renamed tool and skill ids (and renamed parameter keys in call arguments) still present in a
 * rewritten trajectory's messages. The system prompt is the variant's own text (checked by
 * findHarnessLeaks) plus the renderer's layout words (`id`, `tools`, ...) plus the room: only the
 * room's text is checked here, so a tool once called `id` is not found in the layout.
 */
export function findTrajectoryLeaks(
  trajectory: Trajectory,
  calls: readonly RewrittenCall[],
  mapping: VariantMapping,
  entityRenamer: TextRenamer,
  context: RenderContext,
): Leak[] {
  const leaks: Leak[] = [...entityRenamer.findLeaks(context.roomContext ?? '', 'message 0 (system) room context')];
  trajectory.messages.forEach((message, index) => {
    if (message.content !== null && index > 0)
      leaks.push(...entityRenamer.findLeaks(message.content, `message ${index} (${message.role})`));
    if (message.role === 'assistant') {
      if (message.reasoning_content !== undefined)
        leaks.push(...entityRenamer.findLeaks(message.reasoning_content, `message ${index} reasoning`));
      for (const call of message.tool_calls ?? [])
        leaks.push(...entityRenamer.findLeaks(call.function.name, `message ${index} tool call ${call.id}`));
    }
  });
  const renamedParameters = new Set(
    mapping.renames.filter((rename) => rename.kind === 'parameter').map((rename) => rename.from),
  );
  for (const call of calls) {
    for (const key of argumentKeys(call.variantArguments)) {
      if (renamedParameters.has(key))
        leaks.push({ name: key, kind: 'parameter', where: `tool call ${call.rewritten.id} arguments` });
    }
  }
  return leaks;
}

function argumentKeys(value: unknown): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, child]) => [key, ...argumentKeys(child)]);
}

/** The replies (assistant messages without tool calls) of a trajectory, as the verifier judges them. */
export function finalReplies(trajectory: Trajectory): string[] {
  return trajectory.messages.flatMap((message) =>
    message.role === 'assistant' &&
    (message.tool_calls === undefined || message.tool_calls.length === 0) &&
    message.content !== null &&
    message.content.trim() !== ''
      ? [message.content]
      : [],
  );
}

/**
 * Constraints the variant changed (a new `max_chars` value) that are in force in this room and
 * that a recorded reply does not meet. Such a trajectory needs a new reply (relabel), not a rewrite.
 */
export function checkChangedConstraints(
  trajectory: Trajectory,
  variant: { harness: Harness; mapping: VariantMapping },
  context: RenderContext,
): CheckFailure | undefined {
  const changed = new Map(
    Object.values(variant.mapping.hooks)
      .filter((entry) => entry.constraint !== undefined)
      .map((entry) => [entry.id, entry]),
  );
  if (changed.size === 0) return undefined;
  const replies = finalReplies(trajectory);
  for (const constraint of activeConstraints(variant.harness, context)) {
    if (!changed.has(constraint.hookId)) continue;
    const rule = constraint.constraint;
    if (rule.type !== 'max_chars') continue;
    for (const reply of replies) {
      const length = [...reply.trim()].length;
      if (length > rule.value)
        return {
          detail: `hook ${constraint.hookId}: a recorded reply has ${length} characters, the variant allows ${rule.value}`,
        };
    }
  }
  return undefined;
}
