import { z } from 'zod';
import type { JsonlWriteResult } from '../../shared/artifacts/jsonl-writer';

/** An object a stage part wrote, as part outputs record it: where, its sha256, size and records. */
export const writtenObjectSchema = z.object({
  key: z.string(),
  uri: z.string(),
  sha256: z.string(),
  bytes: z.number().int().nonnegative(),
  records: z.number().int().nonnegative(),
});
export type WrittenObject = z.infer<typeof writtenObjectSchema>;

/** The part-output record of a JSONL object just written. */
export function writtenObjectOf(result: JsonlWriteResult): WrittenObject {
  return { key: result.key, uri: result.uri, sha256: result.sha256, bytes: result.bytes, records: result.records };
}
