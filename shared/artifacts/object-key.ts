import { BadInputError } from '../errors';

/**
 * Segment prefix the file store uses for in-progress writes. Keys may not use it, so a listing
 * never confuses a half-written temp file with a published object.
 */
export const temporarySegmentPrefix = '.hat-tmp-';

/** S3's limit on key length, in UTF-8 bytes; the file store keeps to it too so keys move freely. */
const maximumKeyBytes = 1024;

const controlCharacters = /[\u0000-\u001f\u007f]/;

function rejectKey(key: string, reason: string): never {
  throw new BadInputError(
    'BAD_OBJECT_KEY',
    `object key ${JSON.stringify(key)} ${reason}; use a relative key of "/"-separated names such as "runs/<runId>/<stage>/part-0000.jsonl.gz"`,
  );
}

function checkCharacters(key: string): void {
  if (controlCharacters.test(key)) rejectKey(key, 'contains a control character');
  if (key.includes('\\')) rejectKey(key, 'contains a backslash');
  if (Buffer.byteLength(key, 'utf8') > maximumKeyBytes) rejectKey(key, `is longer than ${maximumKeyBytes} bytes`);
  if (key.startsWith('/')) rejectKey(key, 'is an absolute path');
}

function checkSegment(key: string, segment: string): void {
  if (segment === '') rejectKey(key, 'has an empty segment ("//", or a leading or trailing "/")');
  if (segment === '.' || segment === '..') rejectKey(key, `has a "${segment}" segment`);
  if (segment.startsWith(temporarySegmentPrefix))
    rejectKey(key, `has a segment starting with "${temporarySegmentPrefix}", which is reserved for in-progress writes`);
}

/**
 * The one check every store applies to object keys: relative, "/"-separated, no empty, "." or
 * ".." segments, no backslashes or control characters. Throws BadInputError `BAD_OBJECT_KEY`.
 */
export function validateObjectKey(key: string): string {
  if (key === '') rejectKey(key, 'is empty');
  checkCharacters(key);
  for (const segment of key.split('/')) checkSegment(key, segment);
  return key;
}

/**
 * A listing prefix: like a key, but it may be empty, end with "/", or end part-way through a
 * segment (`runs/r1/collect/part-`).
 */
export function validateKeyPrefix(prefix: string): string {
  if (prefix === '') return prefix;
  checkCharacters(prefix);
  const segments = prefix.split('/');
  const last = segments.pop() ?? '';
  for (const segment of segments) checkSegment(prefix, segment);
  if (last === '.' || last === '..') rejectKey(prefix, `has a "${last}" segment`);
  return prefix;
}

/** Orders keys as S3 lists them: by their UTF-8 bytes. */
export function compareKeys(left: string, right: string): number {
  return Buffer.compare(Buffer.from(left, 'utf8'), Buffer.from(right, 'utf8'));
}
