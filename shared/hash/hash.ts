import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    // What JSON.stringify writes for it (a Date's string; a float kept as Python holds it hashes
    // as its number, so `1.0` and `1` give one hash), not its fields.
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return sortKeys(toJSON.call(value) as unknown);
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[key];
      if (item !== undefined) sorted[key] = sortKeys(item);
    }
    return sorted;
  }
  return value;
}

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** sha256 of the canonical JSON of a value. */
export function hashValue(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/** A short hash (first n hex chars) for ids and keys. */
export function shortHash(value: unknown, length = 12): string {
  return hashValue(value).slice(0, length);
}
