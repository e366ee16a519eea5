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
/** Objects with more keys keep their first ones and say how many were left out. */
const mostKeys = 200;
/**
 * Longer strings keep their start and say how much was left out: a log line must stay a line that
 * shippers accept (many split or drop lines past 16 KiB), and one built from a string near V8's
 * limit would throw.
 */
export const longestString = 16_384;

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

/** What an error says, for a field that could not be read (never throws). */
export function unreadable(error: unknown): string {
  try {
    return logString(error instanceof Error ? error.message : String(error));
  } catch {
    return 'unknown';
  }
}

/** The string, cut at `longestString` with a note of how much was cut. */
export function bounded(text: string): string {
  return text.length > longestString
    ? `${text.slice(0, longestString)}… [${text.length - longestString} more characters]`
    : text;
}

/**
 * A value as text for a log message (a format argument, a first argument that is not an object):
 * strings as they are, objects as the JSON of their safe copy, the rest through `String`. Never
 * throws: a value that cannot be turned into text says why.
 */
export function logText(value: unknown): string {
  try {
    if (typeof value === 'string') return logString(value);
    if (typeof value === 'symbol') return value.toString();
    if (value !== null && typeof value === 'object') return JSON.stringify(copyValue(value, 0, new WeakSet())) ?? '';
    return logString(String(value));
  } catch (error) {
    return `[unprintable: ${unreadable(error)}]`;
  }
}

/**
 * A string redacted, then bounded (in that order: a URL cut in two could no longer be recognised).
 * Redacting a string near V8's length limit may itself fail; then only its length is logged.
 */
function logString(text: string): string {
  try {
    return bounded(redactUrlCredentials(text));
  } catch (error) {
    return `[a string of ${text.length} characters, not logged: ${error instanceof Error ? error.name : 'error'}]`;
  }
}

function isErrorLike(value: object): value is Error {
  return value instanceof Error || (typeof (value as Error).message === 'string' && 'stack' in value);
}

function copyValue(value: unknown, level: number, seen: WeakSet<object>): unknown {
  switch (typeof value) {
    case 'string':
      return logString(value);
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
  // Anything may throw on access (a Proxy, a getter, a revoked object): only this value is lost.
  try {
    return copyObject(object, level, seen);
  } catch (error) {
    return `[unreadable: ${unreadable(error)}]`;
  }
}

function copyObject(object: object, level: number, seen: WeakSet<object>): unknown {
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
    if (isErrorLike(object)) return copyEntries(ownEntries(errorShape(object)), level, seen);
    // What JSON would write for it (a URL's address), for objects that say so themselves.
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return copyValue(toJSON.call(object) as unknown, level + 1, seen);
    return copyEntries(ownEntries(object), level, seen);
  } finally {
    seen.delete(object);
  }
}

/** pino's own error shape: type, message and stack with their causes, and the error's own fields. */
function errorShape(error: Error): object {
  try {
    return pino.stdSerializers.err(error);
  } catch {
    // A field pino reads threw: keep what can be read, say what could not.
    const shape: Record<string, unknown> = {};
    for (const [key, field] of [
      ['type', 'name'],
      ['message', 'message'],
      ['stack', 'stack'],
    ] as const) {
      try {
        shape[key] = error[field];
      } catch (readError) {
        shape[key] = `[unreadable: ${unreadable(readError)}]`;
      }
    }
    return shape;
  }
}

function ownEntries(object: object): [string, unknown][] {
  const entries: [string, unknown][] = [];
  let left = 0;
  for (const key in object) {
    if (entries.length >= mostKeys) {
      left += 1;
      continue;
    }
    let item: unknown;
    try {
      item = (object as Record<string, unknown>)[key];
    } catch (error) {
      item = `[unreadable: ${unreadable(error)}]`;
    }
    entries.push([key, item]);
  }
  if (left > 0) entries.push(['[left out]', `${left} more keys`]);
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
