import { StringDecoder } from 'node:string_decoder';
import type { Dispatcher } from 'undici';
import type { StreamChunkEvent } from '../model-client';
import { unwatchAbort, watchAbort } from '../abort-watch';
import { abortedError, type ModelClock } from '../model-clock';
import {
  errorFromStatus,
  errorFromTransport,
  streamDroppedError,
  timeoutError,
  type EndpointContext,
} from '../model-errors';
import { parseRetryAfter } from '../retry-policy';
import { ChatStreamAssembler, type AssembledChat } from './chat-stream-assembler';

/** One HTTP attempt of a chat completion. */
export interface ChatAttemptInput {
  /** Where to send: `chatRequestTarget(url)`, worked out once per client. */
  target: ChatRequestTarget;
  /** The endpoint's connection pool (undici `Pool` of the URL's origin). */
  dispatcher: Dispatcher;
  /** Request headers as flat name/value pairs (content-length and host are added by the pool). */
  headers: string[];
  body: Buffer;
  timeoutMs: number;
  signal?: AbortSignal;
  context: EndpointContext;
  clock: ModelClock;
  onChunk?: (chunk: StreamChunkEvent) => void;
}

export interface ChatAttemptResult extends AssembledChat {
  /** Epoch ms when the request was sent. */
  startedAt: number;
  /** When the request's last byte was handed to the socket, ms after sending (undefined if that was never reported). */
  writtenMs?: number;
}

/** The request path of an endpoint, so that no call converts its URL again. */
export interface ChatRequestTarget {
  path: string;
}

export function chatRequestTarget(url: URL): ChatRequestTarget {
  return { path: `${url.pathname}${url.search}` };
}

/** Error bodies are read for their message only; a proxy's HTML page need not be read whole. */
const longestErrorBody = 64 * 1024;

/**
 * Sends one request through undici's dispatcher (handler callbacks, no streams: measured lower
 * per-call overhead than node:http and fetch, see bench/openai-client.bench.ts and
 * bench/replay.bench.ts) and reads the SSE stream as it arrives. The clock starts right before
 * the request is dispatched, after the caller's concurrency gate. Resolves as soon as
 * `data: [DONE]` is read: the answer is complete, and the end of the HTTP body often comes in a
 * later network read, behind other calls' work on a busy event loop. The rest of the body is
 * still read (the keep-alive connection goes back to the pool at its end) and the timeout still
 * guards it. Rejects with a classified HatError (status, transport, timeout, dropped stream,
 * abort); never retries itself.
 */
export function runChatAttempt(input: ChatAttemptInput): Promise<ChatAttemptResult> {
  if (input.signal?.aborted) return Promise.reject(abortedError(input.signal));
  return new Promise<ChatAttemptResult>((resolve, reject) => {
    const attempt = new ChatAttempt(input, resolve, reject);
    attempt.start();
  });
}

/**
 * The dispatcher's handler for one attempt: one object per call (its methods are the callbacks),
 * rather than a closure per event. Uses undici's handler interface that its HTTP/1.1 client
 * calls directly (no wrapping), which also reports when the request was written (`onRequestSent`).
 */
class ChatAttempt implements Dispatcher.DispatchHandler {
  private readonly assembler: ChatStreamAssembler;
  private readonly decoder = new StringDecoder('utf8');
  private readonly startedAt: number;
  private sentAt = 0;
  private writtenMs: number | undefined;
  private settled = false;
  /** Response headers arrived (a transport error after them broke off a stream). */
  private responseStarted = false;
  /** The response is an SSE stream (else an error or a plain chat.completion body, read whole). */
  private streaming = false;
  private status = 0;
  private retryAfterMs: number | undefined;
  private text = '';
  private abortRequest: ((error?: Error) => void) | undefined;
  /** The request ended (completed or failed): nothing left to abort. */
  private finished = false;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = (): void => this.fail(abortedError(this.input.signal));

  constructor(
    private readonly input: ChatAttemptInput,
    private readonly resolve: (result: ChatAttemptResult) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.assembler = new ChatStreamAssembler(input.context, input.onChunk);
    this.startedAt = input.clock.now();
    // A timer and abort rather than AbortSignal.timeout + AbortSignal.any: the same effect with
    // fewer objects per call. After an answer resolved at [DONE], it still frees the connection
    // of a server that never ends the body.
    this.timer = setTimeout(this.onTimeout, input.timeoutMs);
  }

  start(): void {
    if (this.input.signal) watchAbort(this.input.signal, this.onAbort);
    this.sentAt = performance.now();
    // Our own timer bounds the call; undici's header and body timeouts (300 s) would cut long answers.
    this.input.dispatcher.dispatch(
      {
        path: this.input.target.path,
        method: 'POST',
        headers: this.input.headers,
        body: this.input.body,
        headersTimeout: 0,
        bodyTimeout: 0,
      },
      this,
    );
  }

  onConnect(abort: (error?: Error) => void): void {
    this.abortRequest = abort;
    // Failed (timeout, caller's abort) before a connection took the request: drop it now.
    if (this.settled) abort(new Error('the model call ended before the request was sent'));
  }

  onRequestSent(): void {
    this.writtenMs = performance.now() - this.sentAt;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    this.responseStarted = true;
    this.status = statusCode;
    let contentType = '';
    const retryHeaders: Record<string, string> = {};
    for (let index = 0; index + 1 < rawHeaders.length; index += 2) {
      const name = rawHeaders[index].toString('latin1').toLowerCase();
      if (name === 'content-type') contentType = rawHeaders[index + 1].toString('latin1');
      else if (name === 'retry-after' || name === 'retry-after-ms')
        retryHeaders[name] = rawHeaders[index + 1].toString('latin1');
    }
    this.streaming = statusCode === 200 && !contentType.includes('application/json');
    if (statusCode !== 200) this.retryAfterMs = parseRetryAfter(retryHeaders, this.input.clock.now());
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return true;
    const piece = this.decoder.write(chunk);
    if (!this.streaming) {
      if (this.text.length < longestErrorBody) this.text += piece;
      return true;
    }
    try {
      this.assembler.feed(piece, performance.now() - this.sentAt);
    } catch (error) {
      this.fail(error);
      return true;
    }
    if (this.assembler.done) this.succeed();
    return true;
  }

  onComplete(): void {
    this.finished = true;
    clearTimeout(this.timer);
    if (this.settled) return;
    const rest = this.decoder.end();
    if (!this.streaming) {
      this.text += rest;
      if (this.status !== 200) {
        this.fail(errorFromStatus(this.status, this.text, this.retryAfterMs, this.input.context));
        return;
      }
      try {
        this.assembler.acceptCompletion(this.text, performance.now() - this.sentAt);
      } catch (error) {
        this.fail(error);
        return;
      }
      this.succeed();
      return;
    }
    try {
      if (rest !== '') this.assembler.feed(rest, performance.now() - this.sentAt);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (!this.assembler.done && !this.assembler.finished) {
      this.fail(streamDroppedError(this.input.context, 'the connection ended before a finish_reason or [DONE]'));
      return;
    }
    this.succeed();
  }

  onError(error: Error): void {
    this.finished = true;
    clearTimeout(this.timer);
    this.fail(errorFromTransport(error, this.input.context, this.responseStarted));
  }

  private readonly onTimeout = (): void => {
    if (this.settled) this.abortRequest?.(timeoutError(this.input.context, this.input.timeoutMs));
    else this.fail(timeoutError(this.input.context, this.input.timeoutMs));
  };

  private succeed(): void {
    let result: ChatAttemptResult;
    try {
      // Object.assign, not `{ ...complete(), startedAt }`: on Node 20 a property added after a leading spread costs ~1 µs.
      result = Object.assign(this.assembler.complete(), { startedAt: this.startedAt, writtenMs: this.writtenMs });
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.settle()) this.resolve(result);
  }

  private fail(error: unknown): void {
    if (!this.settle()) return;
    if (!this.finished) {
      clearTimeout(this.timer);
      this.abortRequest?.(error instanceof Error ? error : new Error(String(error)));
    }
    this.reject(error);
  }

  /** Marks the attempt settled; false when it already was. */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.input.signal) unwatchAbort(this.input.signal, this.onAbort);
    return true;
  }
}
