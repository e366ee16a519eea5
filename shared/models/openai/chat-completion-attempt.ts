import http from 'node:http';
import https from 'node:https';
import { urlToHttpOptions } from 'node:url';
import type { StreamChunkEvent } from '../model-client';
import { abortedError, type ModelClock } from '../model-clock';
import { errorFromStatus, errorFromTransport, streamDroppedError, timeoutError, type EndpointContext } from '../model-errors';
import { parseRetryAfter } from '../retry-policy';
import { ChatStreamAssembler, type AssembledChat } from './chat-stream-assembler';

/** One HTTP attempt of a chat completion. */
export interface ChatAttemptInput {
  /** Where to send: `chatRequestTarget(url)`, worked out once per client. */
  target: ChatRequestTarget;
  agent: http.Agent;
  headers: http.OutgoingHttpHeaders;
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

/** The request options of an endpoint, so that no call converts its URL again. */
export interface ChatRequestTarget {
  transport: typeof http | typeof https;
  options: http.RequestOptions;
}

export function chatRequestTarget(url: URL): ChatRequestTarget {
  return { transport: url.protocol === 'https:' ? https : http, options: { ...urlToHttpOptions(url), method: 'POST' } };
}

/** Error bodies are read for their message only; a proxy's HTML page need not be read whole. */
const longestErrorBody = 64 * 1024;

/**
 * Sends one request with node:http (measured lower per-call overhead than fetch: see
 * bench/openai-client.bench.ts) and reads the SSE stream as it arrives. The clock starts right
 * before the request is written, after the caller's concurrency gate. Resolves as soon as
 * `data: [DONE]` is read: the answer is complete, and the end of the HTTP body often comes in a
 * later network read, behind other calls' work on a busy event loop. The rest of the body is
 * still read (the keep-alive socket goes back to the agent at its end) and the timeout still
 * guards it. Rejects with a classified HatError (status, transport, timeout, dropped stream,
 * abort); never retries itself.
 */
export function runChatAttempt(input: ChatAttemptInput): Promise<ChatAttemptResult> {
  const { context, signal } = input;
  if (signal?.aborted) return Promise.reject(abortedError(signal));
  return new Promise<ChatAttemptResult>((resolve, reject) => {
    const assembler = new ChatStreamAssembler(context, input.onChunk);
    let settled = false;
    let responseStarted = false;
    const settle = (error: unknown, result?: ChatAttemptResult): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (error !== undefined) {
        clearTimeout(timer);
        request.destroy();
        reject(error);
      } else {
        resolve(result as ChatAttemptResult);
      }
    };
    const settleAssembled = (): void => {
      try {
        // Object.assign, not `{ ...complete(), startedAt }`: on Node 20 a property added after a leading spread costs ~1 µs.
        settle(undefined, Object.assign(assembler.complete(), { startedAt, writtenMs }));
      } catch (error) {
        settle(error);
      }
    };
    const onAbort = (): void => settle(abortedError(signal));
    const startedAt = input.clock.now();
    const sentAt = performance.now();
    let writtenMs: number | undefined;
    const request = input.target.transport.request({ agent: input.agent, headers: input.headers, ...input.target.options });
    // A timer and destroy() rather than AbortSignal.timeout + AbortSignal.any: the same effect with
    // fewer objects per call, which the overhead benchmark notices at high concurrency. After an
    // answer resolved at [DONE], it still frees the socket of a server that never ends the body.
    const timer = setTimeout(() => (settled ? request.destroy() : settle(timeoutError(context, input.timeoutMs))), input.timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (error) => settle(errorFromTransport(error, context, responseStarted)));
    request.on('response', (response) => {
      responseStarted = true;
      const status = response.statusCode ?? 0;
      const contentType = String(response.headers['content-type'] ?? '');
      if (status !== 200 || contentType.includes('application/json')) {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (piece: string) => {
          if (text.length < longestErrorBody) text += piece;
        });
        response.on('end', () => {
          if (status !== 200) {
            settle(errorFromStatus(status, text, parseRetryAfter(response.headers, input.clock.now()), context));
            return;
          }
          try {
            assembler.acceptCompletion(text, performance.now() - sentAt);
          } catch (error) {
            settle(error);
            return;
          }
          settleAssembled();
        });
      } else {
        response.setEncoding('utf8');
        response.on('data', (piece: string) => {
          if (settled) return;
          try {
            assembler.feed(piece, performance.now() - sentAt);
          } catch (error) {
            settle(error);
            return;
          }
          if (assembler.done) settleAssembled();
        });
        response.on('end', () => {
          if (!assembler.done && !assembler.finished) {
            settle(streamDroppedError(context, 'the connection ended before a finish_reason or [DONE]'));
            return;
          }
          settleAssembled();
        });
      }
      response.on('error', (error) => settle(errorFromTransport(error, context, true)));
      response.on('close', () => {
        clearTimeout(timer);
        if (!response.complete) settle(streamDroppedError(context, 'the connection closed mid-response'));
      });
    });
    // The callback runs when the body is flushed to the socket: with many requests leaving in one
    // tick, the last ones are written well after their clock started (reported as write time).
    request.end(input.body, () => {
      writtenMs = performance.now() - sentAt;
    });
  });
}
