import { z } from 'zod';
import { ServeRequestError } from './serve-errors';

/** Sampling fields shared by `/v1/completions` and `/v1/chat/completions` (vLLM's names; extra fields are ignored, as vLLM does). */
export const samplingFieldsSchema = z.object({
  model: z.string().nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  /** vLLM: -1 (or 0) turns top-k off. */
  top_k: z.number().int().min(-1).nullish(),
  seed: z.number().int().nullish(),
  n: z.number().int().min(1).nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  stop_token_ids: z.array(z.number().int().min(0)).nullish(),
  ignore_eos: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).loose().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  /** vLLM: false keeps special tokens (e.g. `<|im_end|>`) in the text. Default true. */
  skip_special_tokens: z.boolean().nullish(),
});

/** Parses a request body, answering 400 with the field that is wrong (vLLM's validation error shape). */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ServeRequestError(400, 'The request body must be a JSON object');
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.');
    throw new ServeRequestError(400, `${field ? `${field}: ` : ''}${issue.message}`, field || null);
  }
  return parsed.data;
}

/** `stop` as a list. */
export function stopList(stop: string | string[] | null | undefined): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}
