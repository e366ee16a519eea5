import pino from 'pino';
import { redactUrlCredentials } from '../config/url-credentials';

/** Field names that hold secrets: their values never reach a log line (compared without case). */
export const secretFieldNames = [
  'apiKey',
  'api_key',
  'authorization',
  'password',
  'secretAccessKey',
  'sessionToken',
  'token',
  'accessToken',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'HAT_DASHBOARD_TOKEN',
];

const secretFields = new Set(secretFieldNames.map((name) => name.toLowerCase()));

/** Deeper than this a value is summarised (`config.stages.collect.teacher.apiKey` is four levels). */
const deepestLevel = 8;
/** Longer arrays keep their first items and say how many were left out. */
const longestArray = 50;

export const censored = '[redacted]';

/**
 * A copy of a log line's fields that JSON can always write: secret fields censored at any depth,
 * URL secrets redacted in every string, errors in pino's shape, binary data and cycles summarised.
 *
 * Written by hand instead of pino's `redact` option because that one (fast-redact) throws on any
 * object holding a Buffer (`TypeError: Method get %TypedArray%.prototype.buffer called on
 * incompatible receiver`), and ioredis errors carry their command's Buffer arguments: a logger
 * must not turn the error it reports into a crash.
 */
export function safeLogFields(fields: Record<string, unknown>): Record<string, unknown> {
  try {
    const copy = copyValue(fields, 0, new WeakSet());
    return copy !== null && typeof copy === 'object' && !Array.isArray(copy)
      ? (copy as Record<string, unknown>)
      : { value: copy };
  } catch (error) {
    return { logFieldsUnreadable: unreadable(error) };
  }
}

function unreadable(error: unknown): string {
  try {
    return redactUrlCredentials(error instanceof Error ? error.message : String(error));
  } catch {
    return 'unknown';
  }
}

function isErrorLike(value: object): value is Error {
  return value instanceof Error || (typeof (value as Error).message === 'string' && 'stack' in value);
}

function copyValue(value: unknown, level: number, seen: WeakSet<object>): unknown {
  switch (typeof value) {
    case 'string':
      return redactUrlCredentials(value);
    case 'number':
    case 'boolean':
    case 'undefined':
      return value;
    case 'bigint':
      return value.toString();
    case 'symbol':
      return value.toString();
    case 'function':
      return undefined;
  }
  if (value === null) return null;
  const object = value as object;
  if (ArrayBuffer.isView(object)) return `[${object.constructor.name} ${object.byteLength} bytes]`;
  if (object instanceof ArrayBuffer) return `[ArrayBuffer ${object.byteLength} bytes]`;
  if (object instanceof Date) return Number.isNaN(object.getTime()) ? 'Invalid Date' : object.toISOString();
  if (seen.has(object)) return '[circular]';
  if (level >= deepestLevel) return `[${object.constructor?.name ?? 'Object'} too deep to log]`;
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      const items = object.slice(0, longestArray).map((item) => copyValue(item, level + 1, seen));
      if (object.length > longestArray) items.push(`[${object.length - longestArray} more]`);
      return items;
    }
    if (object instanceof Map)
      return copyEntries(
        [...object.entries()].map(([k, v]) => [String(k), v]),
        level,
        seen,
      );
    if (object instanceof Set) return copyValue([...object], level, seen);
    const source = isErrorLike(object) ? errorShape(object) : object;
    return copyEntries(ownEntries(source), level, seen);
  } finally {
    seen.delete(object);
  }
}

/** pino's own error shape: type, message and stack with their causes, and the error's own fields. */
function errorShape(error: Error): object {
  try {
    return pino.stdSerializers.err(error);
  } catch {
    return { type: error.name, message: error.message, stack: error.stack };
  }
}

function ownEntries(object: object): [string, unknown][] {
  const entries: [string, unknown][] = [];
  for (const key in object) {
    let item: unknown;
    try {
      item = (object as Record<string, unknown>)[key];
    } catch (error) {
      item = `[unreadable: ${unreadable(error)}]`;
    }
    entries.push([key, item]);
  }
  return entries;
}

function copyEntries(entries: [string, unknown][], level: number, seen: WeakSet<object>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const [key, item] of entries) {
    if (secretFields.has(key.toLowerCase())) {
      copy[key] = censored;
      continue;
    }
    const itemCopy = copyValue(item, level + 1, seen);
    if (itemCopy !== undefined) copy[key] = itemCopy;
  }
  return copy;
}
