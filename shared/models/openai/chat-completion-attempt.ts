import http from 'node:http';
import https from 'node:https';
import type { StreamChunkEvent } from '../model-client';
import { abortedError, type ModelClock } from '../model-clock';
import { errorFromStatus, errorFromTransport, streamDroppedError, timeoutError, type EndpointContext } from '../model-errors';
import { parseRetryAfter } from '../retry-policy';
import { ChatStreamAssembler, type AssembledChat } from './chat-stream-assembler';

/** One HTTP attempt of a chat completion. */
export interface ChatAttemptInput {
  url: URL;
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
}

/** Error bodies are read for their message only; a proxy's HTML page need not be read whole. */
const longestErrorBody = 64 * 1024;

/**
 * Sends one request with node:http (measured lower per-call overhead than fetch: see
 * bench/openai-client.bench.ts) and reads the SSE stream as it arrives. The clock starts right
 * before the request is written, after the caller's concurrency gate. Rejects with a classified
 * HatError (status, transport, timeout, dropped stream, abort); never retries itself.
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
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error !== undefined) {
        request.destroy();
        reject(error);
      } else {
        resolve(result as ChatAttemptResult);
      }
    };
    const onAbort = (): void => settle(abortedError(signal));
    const startedAt = input.clock.now();
    const sentAt = performance.now();
    const request = (input.url.protocol === 'https:' ? https : http).request(input.url, {
      method: 'POST',
      agent: input.agent,
      headers: input.headers,
    });
    // A timer and destroy() rather than AbortSignal.timeout + AbortSignal.any: the same effect with
    // fewer objects per call, which the overhead benchmark notices at high concurrency.
    const timer = setTimeout(() => settle(timeoutError(context, input.timeoutMs)), input.timeoutMs);
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
            settle(undefined, { ...assembler.complete(), startedAt });
          } catch (error) {
            settle(error);
          }
        });
      } else {
        response.setEncoding('utf8');
        response.on('data', (piece: string) => {
          if (settled) return;
          try {
            assembler.feed(piece, performance.now() - sentAt);
          } catch (error) {
            settle(error);
          }
        });
        response.on('end', () => {
          if (!assembler.done && !assembler.finished) {
            settle(streamDroppedError(context, 'the connection ended before a finish_reason or [DONE]'));
            return;
          }
          try {
            settle(undefined, { ...assembler.complete(), startedAt });
          } catch (error) {
            settle(error);
          }
        });
      }
      response.on('error', (error) => settle(errorFromTransport(error, context, true)));
      response.on('close', () => {
        if (!response.complete) settle(streamDroppedError(context, 'the connection closed mid-response'));
      });
    });
    request.end(input.body);
  });
}
