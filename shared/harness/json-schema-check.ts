import Ajv, { type ErrorObject } from 'ajv';
import { canonicalJson } from '../hash/hash';
import type { PathSegment } from './source-document';

/** One problem of a JSON Schema, at a path inside that schema. */
export interface SchemaProblem {
  path: PathSegment[];
  message: string;
}

/**
 * Strict ajv: unknown keywords, `required` names that are not properties and keywords used
 * without their type are errors, not warnings. Formats are not validated (no format plugin):
 * `format` stays an annotation the model reads.
 */
let sharedAjv: Ajv | undefined;
function ajv(): Ajv {
  sharedAjv ??= new Ajv({ strict: true, allErrors: true, validateFormats: false });
  return sharedAjv;
}

function pointerToPath(pointer: string): PathSegment[] {
  if (pointer === '' || pointer === '#') return [];
  return pointer
    .replace(/^#?\//, '')
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
}

function describeMetaError(error: ErrorObject): string {
  const allowed = (error.params as { allowedValues?: unknown[] }).allowedValues;
  return allowed ? `${error.message}: ${allowed.join(', ')}` : (error.message ?? 'invalid');
}

/** Results by canonical schema JSON, oldest dropped first. */
const CHECKED_SCHEMAS_LIMIT = 4096;
const checkedSchemas = new Map<string, SchemaProblem[]>();

/**
 * Checks a tool's `parameters` the way the model's server will need them: valid against the
 * JSON Schema meta-schema, compilable by strict ajv, and an object schema at the root (OpenAI
 * function parameters are always an object of named arguments).
 */
export function checkJsonSchema(schema: Record<string, unknown>): SchemaProblem[] {
  // Compiling costs milliseconds per schema, and HSA variants share most tool schemas.
  const key = canonicalJson(schema);
  const cached = checkedSchemas.get(key);
  if (cached) return cached.map((problem) => ({ path: [...problem.path], message: problem.message }));
  const problems = compileAndCheck(schema);
  if (checkedSchemas.size >= CHECKED_SCHEMAS_LIMIT) checkedSchemas.delete(checkedSchemas.keys().next().value as string);
  checkedSchemas.set(key, problems);
  return problems.map((problem) => ({ path: [...problem.path], message: problem.message }));
}

function compileAndCheck(schema: Record<string, unknown>): SchemaProblem[] {
  const validator = ajv();
  if (!validator.validateSchema(schema)) {
    // The meta-schema's anyOf branches report several errors for one spot: keep the first per spot.
    const seen = new Set<string>();
    const problems: SchemaProblem[] = [];
    for (const error of validator.errors ?? []) {
      if (seen.has(error.instancePath)) continue;
      seen.add(error.instancePath);
      problems.push({
        path: pointerToPath(error.instancePath),
        message: `invalid JSON Schema: ${describeMetaError(error)}`,
      });
    }
    return problems;
  }
  const problems: SchemaProblem[] = [];
  try {
    validator.compile(schema);
  } catch (error) {
    const message = (error as Error).message;
    const at = /at "([^"]*)"/.exec(message)?.[1];
    problems.push({ path: at === undefined ? [] : pointerToPath(at), message: `invalid JSON Schema: ${message}` });
  } finally {
    // Ajv caches compiled schemas by object; the augment stage loads thousands of variants.
    validator.removeSchema(schema);
  }
  if (schema.type !== 'object')
    problems.push({ path: ['type'], message: 'function parameters must be a JSON Schema of type "object"' });
  return problems;
}

/** A named property of an object schema, found by `schemaPropertyPaths`. */
export interface SchemaProperty {
  /** Dot-path: `query`, `query.text`, `items[].id`. */
  path: string;
  schema: Record<string, unknown>;
  /** Whether the enclosing object lists it in `required`. */
  required: boolean;
}

/** Every named property of an object schema, depth first, in declaration order. */
export function schemaPropertyPaths(schema: Record<string, unknown>, prefix = ''): SchemaProperty[] {
  const result: SchemaProperty[] = [];
  const properties = schema.properties as Record<string, Record<string, unknown>> | undefined;
  const required = Array.isArray(schema.required) ? (schema.required as unknown[]) : [];
  if (properties && typeof properties === 'object') {
    for (const [name, child] of Object.entries(properties)) {
      const path = prefix ? `${prefix}.${name}` : name;
      if (!child || typeof child !== 'object') continue;
      result.push({ path, schema: child, required: required.includes(name) });
      result.push(...schemaPropertyPaths(child, path));
    }
  }
  const items = schema.items as Record<string, unknown> | undefined;
  if (items && typeof items === 'object' && !Array.isArray(items))
    result.push(...schemaPropertyPaths(items, `${prefix}[]`));
  return result;
}
