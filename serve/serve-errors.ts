import { HatError } from '../shared/errors';

/** An HTTP error answered in vLLM's shape: `{"error": {message, type, param, code}}`. */
export class ServeRequestError extends HatError {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    /** The error type when vLLM's differs from the status's usual one (its request-validation handler says `Bad Request`). */
    private readonly type?: string,
  ) {
    super(status >= 500 ? 'SERVE_INTERNAL' : 'SERVE_BAD_REQUEST', message, { exitCode: status >= 500 ? 1 : 2 });
  }

  /** vLLM's error type for a status. */
  get errorType(): string {
    if (this.type !== undefined) return this.type;
    if (this.status === 404) return 'NotFoundError';
    if (this.status === 405) return 'MethodNotAllowedError';
    if (this.status >= 500) return 'InternalServerError';
    return 'BadRequestError';
  }

  /** The response body; the message without the `[CODE]` prefix, as clients show it. */
  body(): { error: { message: string; type: string; param: string | null; code: number } } {
    return {
      error: {
        message: this.message.replace(/^\[[A-Z_]+\] /, ''),
        type: this.errorType,
        param: this.param,
        code: this.status,
      },
    };
  }

  /** Bad token ids or sampling settings found by the decoder are the client's fault (400); anything else is ours (500). */
  static from(error: unknown): ServeRequestError {
    if (error instanceof ServeRequestError) return error;
    if (HatError.isInstance(error) && error.exitCode === 2) return new ServeRequestError(400, error.message);
    return new ServeRequestError(500, `generation failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
