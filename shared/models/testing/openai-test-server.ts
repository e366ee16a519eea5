import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Rng } from '../../random/rng';
import {
  buildChatChunks,
  buildChatCompletion,
  completionTokensOf,
  drawDelay,
  type ScriptedChatResponse,
  type StreamTiming,
} from './chat-chunk-script';
import {
  handleLlamaCppCompletion,
  handleLlamaCppDetokenize,
  handleSglangGenerate,
  handleVllmCompletion,
  type JsonReply,
  type PromptScorer,
} from './prompt-scoring-handlers';
import { TestServerMetrics, type SpecDecodeSimulation } from './test-server-metrics';

export type { DelaySpec, ScriptedChatResponse, ScriptedToolCall, StreamTiming } from './chat-chunk-script';
export type { PromptPositionScore, PromptScorer, PromptScores, TopToken } from './prompt-scoring-handlers';
export { vllmCounterNames, type SpecDecodeSimulation, type VllmCounterName } from './test-server-metrics';

/** A request as the server received it. */
export interface RecordedRequest {
  /** 0-based arrival order. */
  index: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON body (undefined for GET or an unparsable body). */
  body: any;
  /** Epoch ms of arrival. */
  receivedAt: number;
}

/** What a chat request gets instead of (or before) its scripted answer. */
export type ServerFault =
  /** An HTTP error with an OpenAI-style JSON body; `retryAfter` is the header value (seconds or an HTTP date). */
  | { kind: 'status'; status: number; message?: string; retryAfter?: string; retryAfterMs?: number }
  /** The socket is destroyed after this many chunks of a 200 stream. */
  | { kind: 'drop-mid-stream'; afterChunks: number }
  /** Nothing is sent for this long (before the status line); a timeout test's slow server. */
  | { kind: 'slow-first-byte'; delayMs: number }
  /** The connection is destroyed before any response. */
  | { kind: 'reset' }
  /** A vLLM-style error event in the stream after this many chunks. */
  | { kind: 'stream-error'; afterChunks: number; message?: string };

/** Answers one chat request; may return a fault in place of a response. */
export type ChatResponder = (
  request: RecordedRequest,
) => ScriptedChatResponse | { fault: ServerFault } | Promise<ScriptedChatResponse | { fault: ServerFault }>;

export interface OpenAiTestServerOptions {
  /** Default: echoes the last user message. */
  responder?: ChatResponder;
  /** Server-wide pacing; a response's own `timing` wins. */
  timing?: StreamTiming;
  /** Seed of the delay distributions and the spec-decode simulation. Default `openai-test-server`. */
  seed?: string | number;
  /** Model ids `/v1/models` lists; the first names metrics. Default `['test-model']`. */
  models?: string[];
  /** When set, `/v1/*` requests must carry `Authorization: Bearer <key>` (401 otherwise, echoing the key sent). */
  requiredApiKey?: string;
  /** Backend of `/v1/completions` (token-id prompts) and `/generate`; absent: those answer 501. */
  scorer?: PromptScorer;
  /** vLLM's `--max-logprobs`: `/v1/completions` refuses larger `logprobs`/`prompt_logprobs`. Default 20. */
  maxLogprobs?: number;
  /**
   * The model's end-of-generation ids, where llama-server's `/completion` (also served, on the
   * same scorer) stops: llama-server takes them from the model, not from the request. Default none.
   */
  endOfGenerationIds?: number[];
  specDecode?: SpecDecodeSimulation;
  /** Send an SSE comment (`: keep-alive`) before the first chunk, like hosted APIs. Default false. */
  keepAliveComments?: boolean;
  /**
   * Write every SSE event in two network writes, split inside a multi-byte character when there is
   * one, with a short pause between: exercises the client's reassembly. Default false.
   */
  splitEvents?: boolean;
}

/**
 * A real OpenAI-compatible HTTP server on 127.0.0.1 and a free port, for tests, the demo and the
 * benchmarks: streams `chat.completion.chunk` SSE exactly as servers do, answers non-streaming
 * requests, `/v1/models`, `/metrics` (vLLM counters), vLLM- and SGLang-style token scoring,
 * llama-server's `/completion` and `/detokenize` (the model-adapter how-to's token sampler), and
 * injects faults (status codes with Retry-After, resets, dropped streams, slow first bytes).
 * Records every request so tests can assert what was sent.
 */
export class OpenAiTestServer {
  readonly requests: RecordedRequest[] = [];
  readonly metrics: TestServerMetrics;
  private readonly faults: ServerFault[] = [];
  private readonly rng: Rng;
  private readonly openResponses = new Set<http.ServerResponse>();
  private inFlightCount = 0;
  private maxInFlightCount = 0;
  private requestCounter = 0;
  private responder: ChatResponder;

  private constructor(
    private readonly server: http.Server,
    private readonly options: OpenAiTestServerOptions,
  ) {
    this.rng = new Rng(options.seed ?? 'openai-test-server');
    this.responder = options.responder ?? echoResponder;
    this.metrics = new TestServerMetrics(this.models[0] ?? 'test-model', () => this.inFlightCount);
  }

  static async start(options: OpenAiTestServerOptions = {}): Promise<OpenAiTestServer> {
    const server = http.createServer();
    const instance = new OpenAiTestServer(server, options);
    server.on('request', (request, response) => instance.handle(request, response));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return instance;
  }

  /** `http://127.0.0.1:<port>` (the server root). */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** `<url>/v1`, what OpenAI clients take as baseUrl. */
  get baseUrl(): string {
    return `${this.url}/v1`;
  }

  get models(): string[] {
    return this.options.models ?? ['test-model'];
  }

  /** Inference requests being answered now. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /** Most inference requests answered at once since start or `resetStats`. */
  get maxInFlight(): number {
    return this.maxInFlightCount;
  }

  /** Chat requests received (faulted ones included). */
  get chatRequests(): RecordedRequest[] {
    return this.requests.filter((request) => request.path === '/v1/chat/completions');
  }

  setResponder(responder: ChatResponder): void {
    this.responder = responder;
  }

  /** The next `times` chat requests get this fault, in order, before the responder is asked. */
  injectFault(fault: ServerFault, times = 1): void {
    for (let count = 0; count < times; count++) this.faults.push(fault);
  }

  resetStats(): void {
    this.requests.length = 0;
    this.maxInFlightCount = this.inFlightCount;
  }

  async close(): Promise<void> {
    for (const response of this.openResponses) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: http.IncomingMessage, response: http.ServerResponse): void {
    const pieces: Buffer[] = [];
    request.on('data', (piece: Buffer) => pieces.push(piece));
    request.on('end', () => {
      const text = Buffer.concat(pieces).toString('utf8');
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      const path = (request.url ?? '/').split('?')[0] ?? '/';
      const recorded: RecordedRequest = {
        index: this.requests.length,
        method: request.method ?? 'GET',
        path,
        headers: request.headers,
        body,
        receivedAt: Date.now(),
      };
      this.requests.push(recorded);
      this.route(recorded, text, response).catch((error: unknown) => {
        if (!response.headersSent)
          sendJson(response, 500, {
            error: { message: `test server failure: ${String(error)}`, type: 'server_error' },
          });
        else response.destroy();
      });
    });
  }

  private async route(request: RecordedRequest, text: string, response: http.ServerResponse): Promise<void> {
    if (request.method === 'GET' && request.path === '/health') return void response.writeHead(200).end();
    if (request.method === 'GET' && request.path === '/metrics') {
      const metricsText = await this.metrics.text();
      response.writeHead(200, { 'content-type': this.metrics.contentType });
      return void response.end(metricsText);
    }
    if (request.path.startsWith('/v1/') && this.options.requiredApiKey !== undefined) {
      const sent = String(request.headers.authorization ?? '');
      if (sent !== `Bearer ${this.options.requiredApiKey}`) {
        return sendJson(response, 401, {
          error: {
            message: `Incorrect API key provided: ${sent.replace(/^Bearer /, '') || '(none)'}`,
            type: 'invalid_request_error',
            code: 'invalid_api_key',
          },
        });
      }
    }
    if (request.method === 'GET' && request.path === '/v1/models') {
      return sendJson(response, 200, {
        object: 'list',
        data: this.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'hat-test-server' })),
      });
    }
    const isInference =
      request.method === 'POST' &&
      ['/v1/chat/completions', '/v1/completions', '/generate', '/completion', '/detokenize'].includes(request.path);
    if (!isInference)
      return sendJson(response, 404, {
        error: { message: `no route ${request.method} ${request.path}`, type: 'not_found' },
      });
    if (text !== '' && (typeof request.body !== 'object' || request.body === null)) {
      return sendJson(response, 400, {
        error: { message: 'the request body is not a JSON object', type: 'invalid_request_error' },
      });
    }
    this.inFlightCount++;
    this.maxInFlightCount = Math.max(this.maxInFlightCount, this.inFlightCount);
    this.openResponses.add(response);
    response.on('close', () => {
      this.inFlightCount--;
      this.openResponses.delete(response);
    });
    const requestId = `req-${++this.requestCounter}`;
    if (request.path === '/v1/chat/completions') return this.answerChat(request, response, requestId);
    if (!this.options.scorer) {
      return sendJson(response, 501, {
        object: 'error',
        message: 'this test server has no scorer; pass `scorer` to OpenAiTestServer.start',
        code: 501,
      });
    }
    const reply: JsonReply =
      request.path === '/generate'
        ? await handleSglangGenerate(request.body ?? {}, this.options.scorer, requestId)
        : request.path === '/completion'
          ? await handleLlamaCppCompletion(
              request.body ?? {},
              this.options.scorer,
              this.options.endOfGenerationIds ?? [],
            )
          : request.path === '/detokenize'
            ? handleLlamaCppDetokenize(request.body ?? {}, this.options.scorer)
            : await handleVllmCompletion(
                request.body ?? {},
                this.options.scorer,
                requestId,
                String(request.body?.model ?? this.models[0]),
                this.options.maxLogprobs,
              );
    sendJson(response, reply.status, reply.body);
  }

  private async answerChat(request: RecordedRequest, response: http.ServerResponse, requestId: string): Promise<void> {
    const body = (request.body ?? {}) as Record<string, any>;
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return sendJson(response, 400, {
        error: { message: "'messages' must be a non-empty array", type: 'invalid_request_error', param: 'messages' },
      });
    }
    // An injected fault wraps the responder's answer: a stream dropped or slowed still carries it.
    const queued = this.faults.shift();
    const answer = await this.responder(request);
    const fault = queued ?? ('fault' in answer ? answer.fault : undefined);
    const script: ScriptedChatResponse = 'fault' in answer ? { content: '' } : answer;
    const closed = closedSignal(response);
    if (fault?.kind === 'reset') return void response.socket?.destroy();
    if (fault?.kind === 'slow-first-byte') await sleepUnless(fault.delayMs, closed);
    if (closed.aborted) return;
    if (fault?.kind === 'status') {
      const headers: Record<string, string> = {};
      if (fault.retryAfter !== undefined) headers['retry-after'] = fault.retryAfter;
      if (fault.retryAfterMs !== undefined) headers['retry-after-ms'] = String(fault.retryAfterMs);
      const type =
        fault.status === 429 ? 'rate_limit_error' : fault.status >= 500 ? 'server_error' : 'invalid_request_error';
      return sendJson(
        response,
        fault.status,
        { error: { message: fault.message ?? `injected HTTP ${fault.status}`, type, code: fault.status } },
        headers,
      );
    }
    const topLogprobs =
      body.logprobs === true ? (Number.isInteger(body.top_logprobs) ? (body.top_logprobs as number) : 0) : undefined;
    const context = {
      requestId: `chatcmpl-${requestId}`,
      model: script.model ?? String(body.model ?? this.models[0]),
      created: 1_700_000_000 + this.requestCounter,
      promptTokens: script.promptTokens ?? Math.ceil(JSON.stringify(body.messages).length / 4),
      includeUsage: body.stream_options?.include_usage === true,
      topLogprobs,
      timing: script.timing ?? this.options.timing ?? {},
      rng: this.rng,
    };
    if (body.stream !== true) {
      await sleepUnless(drawDelay(context.timing.ttftMs, this.rng), closed);
      if (closed.aborted) return;
      sendJson(response, 200, buildChatCompletion(script, context));
      this.metrics.recordResponse(context.promptTokens, completionTokensOf(script), this.options.specDecode, this.rng);
      return;
    }
    const chunks = buildChatChunks(script, context);
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    if (this.options.keepAliveComments) response.write(': keep-alive\n\n');
    const paced = this.options.splitEvents || chunks.some((chunk) => chunk.delayMs > 0);
    if (!paced) response.socket?.cork();
    let written = 0;
    for (const chunk of chunks) {
      if (fault?.kind === 'drop-mid-stream' && written >= fault.afterChunks) {
        if (!paced) response.socket?.uncork();
        await sleepUnless(5, closed);
        return void response.socket?.destroy();
      }
      if (fault?.kind === 'stream-error' && written >= fault.afterChunks) {
        response.write(
          `data: ${JSON.stringify({ object: 'error', message: fault.message ?? 'injected engine failure', type: 'InternalServerError', code: 500 })}\n\n`,
        );
        break;
      }
      if (chunk.delayMs > 0) await sleepUnless(chunk.delayMs, closed);
      if (closed.aborted) return;
      await this.writeEvent(response, `data: ${chunk.data}\n\n`, closed);
      script.onEventWritten?.(chunk.choices);
      written++;
    }
    if (!paced) response.socket?.uncork();
    response.end();
    if (fault?.kind !== 'stream-error')
      this.metrics.recordResponse(context.promptTokens, completionTokensOf(script), this.options.specDecode, this.rng);
  }

  private async writeEvent(response: http.ServerResponse, event: string, closed: AbortSignal): Promise<void> {
    if (!this.options.splitEvents) {
      response.write(event);
      return;
    }
    const bytes = Buffer.from(event, 'utf8');
    const multiByte = bytes.findIndex((byte) => byte >= 0x80);
    const cut = multiByte >= 0 ? multiByte + 1 : Math.floor(bytes.length / 2);
    response.write(bytes.subarray(0, cut));
    await sleepUnless(2, closed);
    if (!closed.aborted) response.write(bytes.subarray(cut));
  }
}

/** The default answer: echoes the last user message. */
export function echoResponder(request: RecordedRequest): ScriptedChatResponse {
  const messages = (request.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const lastUser = [...messages].reverse().find((message) => message.role === 'user');
  return { content: `echo: ${typeof lastUser?.content === 'string' ? lastUser.content : ''}` };
}

function sendJson(
  response: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (response.destroyed) return;
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

/** The abort reason of every closed response: one object, not a DOMException (and its stack) per response. */
const responseClosed = new Error('the response closed');

/** Aborts when the client goes away, so paced responses stop instead of writing into a dead socket. */
function closedSignal(response: http.ServerResponse): AbortSignal {
  const controller = new AbortController();
  response.on('close', () => controller.abort(responseClosed));
  return controller.signal;
}

function sleepUnless(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
