import { z } from 'zod';
import type { ServeContext, ServeGenerationRequest } from './serve-engine';
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
  stream_options: z
    .object({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() })
    .loose()
    .nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  /** vLLM: false keeps special tokens (e.g. `<|im_end|>`) in the text. Default true. */
  skip_special_tokens: z.boolean().nullish(),
});

/** The sampling settings of a request (either endpoint), with the model's generation defaults for what it leaves out, as vLLM does. */
export function samplingSettingsOf(
  context: ServeContext,
  request: z.infer<typeof samplingFieldsSchema>,
): Pick<
  ServeGenerationRequest,
  | 'temperature'
  | 'topP'
  | 'topK'
  | 'seed'
  | 'stop'
  | 'stopTokenIds'
  | 'ignoreEos'
  | 'includeStopStringInOutput'
  | 'keepSpecialTokens'
> {
  const defaults = context.served.samplingDefaults;
  return {
    temperature: request.temperature ?? defaults.temperature ?? 1,
    topP: request.top_p ?? defaults.topP ?? 1,
    topK: request.top_k ?? defaults.topK ?? 0,
    seed: request.seed ?? undefined,
    stop: stopList(request.stop),
    stopTokenIds: request.stop_token_ids ?? [],
    ignoreEos: request.ignore_eos === true,
    includeStopStringInOutput: request.include_stop_str_in_output === true,
    keepSpecialTokens: request.skip_special_tokens === false,
  };
}

/** Parses a request body, answering 400 with the field that is wrong (vLLM's validation error shape). */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new ServeRequestError(400, 'The request body must be a JSON object');
  refuseUnsupportedSampling(body);
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join('.');
    throw new ServeRequestError(400, `${field ? `${field}: ` : ''}${issue.message}`, field || null);
  }
  return parsed.data;
}

/** Sampling features vLLM has and `hat serve` does not, with the value that means "off". */
const unsupportedFields: Array<[field: string, isOff: (value: unknown) => boolean]> = [
  ['presence_penalty', (value) => value === 0],
  ['frequency_penalty', (value) => value === 0],
  ['repetition_penalty', (value) => value === 1],
  ['min_p', (value) => value === 0],
  ['min_tokens', (value) => value === 0],
  ['best_of', (value) => value === 1],
  ['use_beam_search', (value) => value === false],
  ['logit_bias', (value) => typeof value === 'object' && value !== null && Object.keys(value).length === 0],
  ['bad_words', (value) => Array.isArray(value) && value.length === 0],
  ['guided_json', () => false],
  ['guided_regex', () => false],
  ['guided_choice', () => false],
  ['guided_grammar', () => false],
  ['structured_outputs', () => false],
  ['response_format', (value) => (value as { type?: unknown }).type === 'text'],
];

/**
 * Refuses a request that turns on a sampling feature this server does not implement: ignoring
 * it (as vLLM ignores unknown fields) would silently sample from another distribution.
 */
export function refuseUnsupportedSampling(body: unknown): void {
  if (body === null || typeof body !== 'object') return;
  const record = body as Record<string, unknown>;
  for (const [field, isOff] of unsupportedFields) {
    const value = record[field];
    if (value === undefined || value === null || isOff(value)) continue;
    throw new ServeRequestError(
      400,
      `hat serve does not implement ${field} (got ${JSON.stringify(value)}); leave it out or at its default`,
      field,
    );
  }
}

/** `stop` as a list. */
export function stopList(stop: string | string[] | null | undefined): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}
