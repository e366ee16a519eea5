import type { z } from 'zod';
import { ValidationError } from '../errors';
import { recordSchemaError } from './jsonl-writer';

/** At most this many unknown fields are named per record (a field repeated in every array element would list them all). */
const namedFieldLimit = 20;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Paths of the fields of `input` (a record as JSON.parse gave it) that `output` (the schema's
 * parse of it) no longer has: the fields a zod object schema strips because it does not declare
 * them. What a schema declares open (`z.record`, `z.looseObject`, `z.unknown`: a trajectory's
 * `meta`, a tool's `parameters`) is kept by the parse and so is never named here.
 */
export function unknownFieldPaths(input: unknown, output: unknown, limit = namedFieldLimit): string[] {
  const found: string[] = [];
  const walk = (from: unknown, to: unknown, path: string): void => {
    if (Array.isArray(from)) {
      if (!Array.isArray(to)) return;
      for (let index = 0; index < from.length && index < to.length && found.length < limit; index++)
        walk(from[index], to[index], `${path}[${index}]`);
      return;
    }
    if (!isPlainObject(from) || !isPlainObject(to) || from === to) return;
    for (const key of Object.keys(from)) {
      if (found.length >= limit) return;
      const child = path === '' ? key : `${path}.${key}`;
      if (Object.hasOwn(to, key)) walk(from[key], to[key], child);
      else found.push(child);
    }
  };
  walk(input, output, '');
  return found;
}

/** A zod issue path as `room.items[1].colour`. */
function joinPath(path: readonly PropertyKey[]): string {
  return path
    .map((segment, index) =>
      typeof segment === 'number' ? `[${segment}]` : `${index === 0 ? '' : '.'}${String(segment)}`,
    )
    .join('');
}

/** `UNKNOWN_FIELD`: the record at `lineNumber` of `uri` carries the fields at `paths`, which its schema does not declare. */
export function unknownFieldsError(uri: string, lineNumber: number, paths: readonly string[]): ValidationError {
  return new ValidationError(
    'UNKNOWN_FIELD',
    `line ${lineNumber} of ${uri} has fields its schema does not declare; remove or rename them (a record is refused rather than read without them)`,
    paths.map((path) => ({ file: uri, line: lineNumber, path, message: 'not a field of this record' })),
  );
}

/**
 * One record read from a file, checked against its schema: `BAD_RECORD` for a field that does not
 * match, `UNKNOWN_FIELD` for a field the schema does not declare. A record is refused rather than
 * passed on without the fields it had: a misspelt field (`turn` for `turns`) or a field of another
 * version would otherwise vanish without a word, with all its bytes.
 */
export function parseRecord<T>(schema: z.ZodType<T>, value: unknown, uri: string, lineNumber: number): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    // A strict schema (`.strict()`, z.strictObject) refuses unknown keys itself: the same refusal.
    const issues = result.error.issues;
    if (issues.every((issue) => issue.code === 'unrecognized_keys'))
      throw unknownFieldsError(
        uri,
        lineNumber,
        issues.flatMap((issue) => issue.keys.map((key) => joinPath([...issue.path, key]))),
      );
    throw recordSchemaError(uri, lineNumber, result.error, 'read');
  }
  const unknown = unknownFieldPaths(value, result.data);
  if (unknown.length > 0) throw unknownFieldsError(uri, lineNumber, unknown);
  return result.data;
}
