import { pipeline } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip } from 'node:zlib';
import type { z } from 'zod';
import { BadInputError } from '../errors';
import type { ArtifactStore } from './artifact-store';
import { recordSchemaError } from './jsonl-writer';

export interface JsonlReadOptions<T> {
  /** Checked against every record; the first mismatch throws BadInputError `BAD_RECORD` naming line and field. */
  schema?: z.ZodType<T>;
}

/** Whether a key holds gzip data, by its name (`.gz`). */
export function isGzipKey(key: string): boolean {
  return key.endsWith('.gz');
}

/**
 * Streams the records of a JSON Lines object (gunzipped when the key ends in `.gz`), one parsed
 * record at a time. Blank lines are skipped; line numbers count them, so they match an editor's.
 */
export async function* readJsonl<T = unknown>(store: ArtifactStore, key: string, options: JsonlReadOptions<T> = {}): AsyncGenerator<T> {
  const uri = store.uriOf(key);
  const source = await store.getStream(key);
  const gunzip = isGzipKey(key) ? createGunzip() : undefined;
  const stream = gunzip ? pipeline(source, gunzip, () => undefined) : source;
  const decoder = new StringDecoder('utf8');
  let remainder = '';
  let lineNumber = 0;

  const parse = (line: string): T | undefined => {
    lineNumber += 1;
    const text = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (text.trim() === '') return undefined;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new BadInputError('BAD_JSONL', `${uri}: line ${lineNumber}: not valid JSON (${(error as Error).message}); each line must hold one JSON value`);
    }
    if (!options.schema) return value as T;
    const result = options.schema.safeParse(value);
    if (!result.success) throw recordSchemaError(uri, lineNumber, result.error, 'read');
    return result.data;
  };

  try {
    try {
      for await (const chunk of stream) {
        const text = remainder + decoder.write(chunk as Buffer);
        let start = 0;
        let newline = text.indexOf('\n', start);
        while (newline !== -1) {
          const record = parse(text.slice(start, newline));
          if (record !== undefined) yield record;
          start = newline + 1;
          newline = text.indexOf('\n', start);
        }
        remainder = text.slice(start);
      }
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (gunzip && typeof code === 'string' && code.startsWith('Z_')) {
        throw new BadInputError('BAD_JSONL', `${uri}: not valid gzip data (${(error as Error).message}); is it a .gz file?`, { cause: error });
      }
      throw error;
    }
    remainder += decoder.end();
    const record = remainder === '' ? undefined : parse(remainder);
    if (record !== undefined) yield record;
  } finally {
    source.destroy();
    gunzip?.destroy();
  }
}
