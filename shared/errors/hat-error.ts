/**
 * The one error base of the project. Every error that crosses a boundary (BullMQ, the CLI,
 * HTTP) carries a stable SCREAMING_SNAKE `code`, whether it is worth retrying, and the exit code
 * the CLI maps it to. Messages start with `[CODE]` so they survive BullMQ's string-only
 * `failedReason`.
 */
const marker = Symbol.for('hat.error');

export type ExitCode = 0 | 1 | 2;

export interface HatErrorOptions {
  /** Whether a retry of the same work can succeed (transient fault). Default false. */
  retryable?: boolean;
  /** CLI exit code. Default 1 (failure of the work); 2 for bad usage or bad input. */
  exitCode?: ExitCode;
  cause?: unknown;
  /** Structured details for logs and reports (never secrets). */
  details?: Record<string, unknown>;
}

export class HatError extends Error {
  readonly [marker] = true;
  readonly code: string;
  readonly retryable: boolean;
  readonly exitCode: ExitCode;
  readonly details?: Record<string, unknown>;

  constructor(code: string, message: string, options: HatErrorOptions = {}) {
    super(message.startsWith(`[${code}]`) ? message : `[${code}] ${message}`, { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.exitCode = options.exitCode ?? 1;
    this.details = options.details;
  }

  static isInstance(value: unknown): value is HatError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[marker] === true;
  }
}

/** Bad input or bad usage: permanent, never retried, exit code 2. */
export class BadInputError extends HatError {
  constructor(code: string, message: string, options: Omit<HatErrorOptions, 'retryable' | 'exitCode'> = {}) {
    super(code, message, { ...options, retryable: false, exitCode: 2 });
  }
}

/** A transient fault (5xx, 429, timeout, connection reset): retried with backoff. */
export class TransientError extends HatError {
  /** Server hint in milliseconds (Retry-After), when it gave one. */
  readonly retryAfterMs?: number;
  constructor(
    code: string,
    message: string,
    options: Omit<HatErrorOptions, 'retryable'> & { retryAfterMs?: number } = {},
  ) {
    super(code, message, { ...options, retryable: true });
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Extracts `CODE` from a `[CODE] message` string (as stored in BullMQ's failedReason). */
export function errorCodeOf(error: unknown): string | undefined {
  if (HatError.isInstance(error)) return error.code;
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : undefined;
  const match = message?.match(/^\[([A-Z][A-Z0-9_]*)\]/);
  return match?.[1];
}

/** Whether an error is worth retrying: our own flag, else common network error codes. */
export function isRetryable(error: unknown): boolean {
  if (HatError.isInstance(error)) return error.retryable;
  const code = (error as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' &&
    ['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'UND_ERR_SOCKET'].includes(code)
  );
}

/** The CLI's exit code for an error. */
export function exitCodeOf(error: unknown): ExitCode {
  return HatError.isInstance(error) ? error.exitCode : 1;
}
