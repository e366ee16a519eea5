import { BadInputError, HatError, TransientError } from '../errors';

/** Stable codes of model-call failures (the `[CODE]` prefix of their messages). */
export const modelErrorCodes = {
  /** The server refused the request (4xx other than 408/409/429): retrying cannot help. */
  badRequest: 'MODEL_BAD_REQUEST',
  /** 429: the server asked us to slow down. */
  rateLimited: 'MODEL_RATE_LIMITED',
  /** 5xx, 408, 409, or an error event inside the stream. */
  serverError: 'MODEL_SERVER_ERROR',
  /** No complete response within the configured time. */
  timeout: 'MODEL_TIMEOUT',
  /** The connection could not be made or was reset before a response arrived. */
  connectionFailed: 'MODEL_CONNECTION_FAILED',
  /** The response stream ended before the server said it was complete. */
  streamDropped: 'MODEL_STREAM_DROPPED',
  /** The server sent something that is not an OpenAI-compatible response. */
  badResponse: 'MODEL_BAD_RESPONSE',
  /** Retries are spent; the last fault is the cause. */
  unavailable: 'MODEL_UNAVAILABLE',
  /** The caller aborted the call. */
  aborted: 'MODEL_ABORTED',
  /** The client was used after close(): a programming error. */
  clientClosed: 'MODEL_CLIENT_CLOSED',
  /** The API key named in the config could not be read. */
  apiKeyMissing: 'MODEL_API_KEY_MISSING',
  /** The model config is invalid or names an adapter nobody registered. */
  badConfig: 'MODEL_BAD_CONFIG',
} as const;

/** Where a failed call went, for messages; `redact` strips the API key from server-provided text. */
export interface EndpointContext {
  url: string;
  model: string;
  redact: (text: string) => string;
}

const longestServerMessage = 500;

/**
 * The one place an HTTP status becomes an error class: 429 and 5xx/408/409 are transient
 * (with the server's retry hint), every other 4xx is permanent bad input carrying the server's
 * own message and a hint of what to fix.
 */
export function errorFromStatus(
  status: number,
  body: string,
  retryAfterMs: number | undefined,
  context: EndpointContext,
): HatError {
  const serverMessage = context.redact(serverMessageOf(body) ?? '(no message)');
  const where = `${context.url} (model ${context.model}) answered HTTP ${status}: ${serverMessage}`;
  const details = { status, url: context.url, model: context.model };
  if (status === 429) {
    return new TransientError(modelErrorCodes.rateLimited, where, { retryAfterMs, details });
  }
  if (status >= 500 || status === 408 || status === 409) {
    return new TransientError(modelErrorCodes.serverError, where, { retryAfterMs, details });
  }
  return new BadInputError(modelErrorCodes.badRequest, `${where}${hintFor(status)}`, { details });
}

function hintFor(status: number): string {
  if (status === 401 || status === 403) return '; check the API key named by apiKeyEnv/apiKeyFile in the model config';
  if (status === 404)
    return '; check baseUrl and model in the model config (GET /v1/models lists what the server serves)';
  if (status === 413) return '; the request is too large for this server: shorten the prompt or lower maxTokens';
  return '; fix the request (messages, tools or sampling settings) or the model config';
}

/** Text of an OpenAI (`{error:{message}}`) or vLLM (`{object:"error",message}`) error body. */
export function serverMessageOf(body: string): string | undefined {
  const trimmed = body.trim();
  if (!trimmed) return undefined;
  try {
    const parsed = JSON.parse(trimmed) as { error?: unknown; message?: unknown; detail?: unknown };
    const error = parsed.error;
    const message =
      typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string'
        ? (error as { message: string }).message
        : typeof error === 'string'
          ? error
          : typeof parsed.message === 'string'
            ? parsed.message
            : typeof parsed.detail === 'string'
              ? parsed.detail
              : undefined;
    if (message !== undefined) return truncate(message);
  } catch {
    // Not JSON: proxies and load balancers answer with plain text or HTML.
  }
  return truncate(trimmed);
}

function truncate(text: string): string {
  return text.length > longestServerMessage ? `${text.slice(0, longestServerMessage)}…` : text;
}

/** Socket-level failures: every one is worth another attempt. */
export function errorFromTransport(cause: unknown, context: EndpointContext, duringStream: boolean): HatError {
  const code = (cause as { code?: unknown } | null)?.code;
  const reason = context.redact(cause instanceof Error ? cause.message : String(cause));
  const label = typeof code === 'string' ? `${code}: ${reason}` : reason;
  return duringStream
    ? new TransientError(
        modelErrorCodes.streamDropped,
        `the response stream from ${context.url} broke off (${label})`,
        { cause },
      )
    : new TransientError(
        modelErrorCodes.connectionFailed,
        `could not reach ${context.url} (${label}); check that the server runs and baseUrl is right`,
        { cause },
      );
}

export function timeoutError(context: EndpointContext, timeoutMs: number): HatError {
  return new TransientError(
    modelErrorCodes.timeout,
    `${context.url} (model ${context.model}) gave no complete response within ${timeoutMs} ms (timeoutMs)`,
  );
}

export function streamDroppedError(context: EndpointContext, detail: string): HatError {
  return new TransientError(
    modelErrorCodes.streamDropped,
    `the response stream from ${context.url} ended early: ${detail}`,
  );
}

/** Garbage from the server: retried, since proxies and overloaded servers produce it transiently. */
export function badResponseError(context: EndpointContext, detail: string): HatError {
  return new TransientError(
    modelErrorCodes.badResponse,
    `${context.url} sent a response that is not OpenAI-compatible: ${context.redact(detail)}`,
  );
}

/** Server-reported failure inside an otherwise good stream (vLLM sends these as data events). */
export function streamErrorEvent(context: EndpointContext, body: string): HatError {
  return new TransientError(
    modelErrorCodes.serverError,
    `${context.url} reported an error mid-stream: ${context.redact(serverMessageOf(body) ?? body)}`,
  );
}

/** After the retries are spent: transient, so the job queue may still retry the job later. */
export function unavailableError(context: EndpointContext, attempts: number, lastError: unknown): HatError {
  const last = lastError instanceof Error ? lastError.message : String(lastError);
  return new TransientError(
    modelErrorCodes.unavailable,
    `${context.url} (model ${context.model}) failed ${attempts} attempt${attempts === 1 ? '' : 's'}; last: ${last}`,
    {
      cause: lastError,
      retryAfterMs: lastError instanceof TransientError ? lastError.retryAfterMs : undefined,
      details: { attempts, lastCode: HatError.isInstance(lastError) ? lastError.code : undefined },
    },
  );
}
