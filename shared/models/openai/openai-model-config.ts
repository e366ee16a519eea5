import { z } from 'zod';
import { credentialsProblem, describeUrlCredentials } from '../../config/url-credentials';

/** Sampling defaults of a model config; a request's own values win. */
export const samplingSettingsSchema = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    topP: z.number().gt(0).max(1).optional(),
    /** Sent as vLLM/SGLang's `top_k`; hosted OpenAI rejects it, so leave it unset there. */
    topK: z.number().int().min(-1).optional(),
    maxTokens: z.number().int().positive().optional(),
    seed: z.number().int().optional(),
    stop: z.array(z.string()).max(16).optional(),
  })
  .strict();

/** An http(s) endpoint URL without a key in it (a key there would be logged and stored); `example` goes into the message. */
export function httpEndpointUrl(example: string) {
  return z
    .string()
    .refine(isHttpUrl, `must be an http:// or https:// URL, e.g. ${example}`)
    .superRefine((value, context) => {
      const found = describeUrlCredentials(value);
      if (found) context.addIssue({ code: 'custom', message: credentialsProblem(found) });
    });
}

const httpUrl = httpEndpointUrl('http://127.0.0.1:8000/v1');

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * Config of the `openai` adapter: any OpenAI-compatible chat server (vLLM, SGLang, hosted APIs).
 * It names where the API key comes from and never holds the key itself.
 */
export const openAiModelConfigSchema = z
  .object({
    adapter: z.literal('openai'),
    /** Server root or its `/v1` root, e.g. `http://127.0.0.1:8000/v1`; requests go to `<root>/v1/chat/completions`. */
    baseUrl: httpUrl,
    /** Model id sent as `model` (what `GET /v1/models` lists). */
    model: z.string().min(1),
    /** Environment variable holding the API key. Unset (with apiKeyFile unset): no Authorization header. */
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name such as OPENAI_API_KEY')
      .optional(),
    /** File holding the API key (e.g. a mounted secret); beats apiKeyEnv when both are set. */
    apiKeyFile: z.string().min(1).optional(),
    /** Limit of one attempt from sending to the end of the stream, ms. Default 120000. */
    timeoutMs: z.number().int().positive().default(120_000),
    /** Retries of transient faults (429, 5xx, timeouts, resets, dropped streams). Default 4. */
    maxRetries: z.number().int().min(0).max(20).default(4),
    /** Backoff before the first retry, ms (doubles per retry, with jitter). Default 500. */
    retryInitialDelayMs: z.number().int().min(0).default(500),
    /** Cap of the backoff, ms. Default 20000. */
    retryMaxDelayMs: z.number().int().min(0).default(20_000),
    /** Longest `Retry-After` waited out in-process, ms; longer hints end the call as MODEL_UNAVAILABLE. Default 60000. */
    maxRetryAfterMs: z.number().int().min(0).default(60_000),
    /** Requests in flight at once to this endpoint from this process (shared by all its clients). Default 16. */
    concurrency: z.number().int().positive().default(16),
    /** Requests per minute to this endpoint from this process. Default: unlimited. */
    requestsPerMinute: z.number().positive().optional(),
    /** Estimated prompt + completion tokens per minute to this endpoint from this process. Default: unlimited. */
    tokensPerMinute: z.number().positive().optional(),
    /** Sampling defaults for every request. */
    sampling: samplingSettingsSchema.default({}),
    /**
     * How hook messages (system messages in the middle of a conversation) are sent. `folded`: for
     * servers whose chat template accepts a system message only at the start (Qwen3.5 and
     * Qwen3-Coder raise "System message must be at the beginning"): each is folded into the
     * neighbouring user turn or tool result in a marked block, exactly as shard and rl render them
     * for training (shared/text/hook-messages.ts). Default `system-messages` (sent as they are).
     */
    hookMessages: z.enum(['system-messages', 'folded']).default('system-messages'),
    /** Extra request-body fields for every request (e.g. `chat_template_kwargs`, `repetition_penalty`). */
    extraBody: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

export type OpenAiModelConfig = z.infer<typeof openAiModelConfigSchema>;
export type OpenAiModelConfigInput = z.input<typeof openAiModelConfigSchema>;

/** `http://host:8000/v1/` and `http://host:8000` both give `http://host:8000`. */
export function serverRootOf(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
}
