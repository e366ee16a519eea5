import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BadInputError } from '../shared/errors';
import { version } from '../shared/version';
import { handleChatCompletion } from './chat-completions-handler';
import { handleCompletion } from './completions-handler';
import { GenerationScheduler } from './generation-scheduler';
import { type LogprobsMode, type ServeContext } from './serve-engine';
import { ServeRequestError } from './serve-errors';
import { ServeMetrics } from './serve-metrics';
import { loadServedModel, resolveServeModel } from './serve-model';
import { SseWriter } from './sse-writer';
import { handleDetokenize, handleTokenize } from './tokenize-handler';
import { parseJsonKeepingFloats } from '../shared/text/python-values';
import { selectToolCallParser, type ToolCallParser } from '../shared/text/tool-parsers';

export interface ServeServerOptions {
  /** An ONNX model directory (Optimum decoder layout), or a `dummy:` spec (see resolveServeModel). */
  model: string;
  /** Id clients send as `model` (vLLM's --served-model-name). Default: the directory's name. */
  servedModelName?: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** Which distribution logprobs are of (vLLM's --logprobs-mode). Default raw_logprobs. */
  logprobsMode?: LogprobsMode;
  /** Largest `logprobs` / `prompt_logprobs` accepted (vLLM's --max-logprobs). Default 20. */
  maxLogprobs?: number;
  /** Most requests decoded in one batch. Default 8. */
  maxBatchSize?: number;
  /** Tool-call parser: a name (hermes, qwen3_coder, llama3_json) or `auto` (detected from the chat template). Default auto. */
  toolCallParser?: string;
  /** Where dummy models are generated. Default .hat/models. */
  cacheDir?: string;
  /** onnxruntime intra-op threads. */
  intraOpThreads?: number;
  /** Longest prompt + completion (vLLM's --max-model-len). Default: config.json max_position_embeddings. */
  maxModelLength?: number;
  /** When set, `/v1/*` requests must send `Authorization: Bearer <key>` (vLLM's --api-key). */
  apiKey?: string;
}

export interface ServeServer {
  /** `http://host:port` (the server root). */
  url: string;
  /** `<url>/v1`, what OpenAI clients take as base URL. */
  baseUrl: string;
  modelId: string;
  modelDir: string;
  dummyWeights: boolean;
  logprobsMode: LogprobsMode;
  /** The tool-call parser in use (null: the template has no known tool-call format). */
  toolCallParser: string | null;
  /** Requests waiting and decoding now. */
  counts(): { waiting: number; running: number };
  close(): Promise<void>;
}

/**
 * Starts `hat serve` in-process: a vLLM-compatible HTTP server over an ONNX model (the subset of
 * vLLM's OpenAI-compatible API the pipeline uses), for CPU smoke tests of real exported models,
 * the demo and the tests. Resolves once the model is loaded and the port is listening.
 */
export async function startServeServer(options: ServeServerOptions): Promise<ServeServer> {
  const { modelDir } = resolveServeModel(options.model, options.cacheDir);
  const served = await loadServedModel(modelDir, {
    modelId: options.servedModelName,
    intraOpThreads: options.intraOpThreads,
  });
  if (options.maxModelLength !== undefined) served.maxModelLength = options.maxModelLength;
  const metrics = new ServeMetrics(served.modelId);
  const scheduler = new GenerationScheduler(served.model.decoder, options.maxBatchSize ?? 8, (counts) =>
    metrics.setCounts(counts),
  );
  let toolParser: ToolCallParser | null;
  try {
    toolParser = selectToolCallParser(options.toolCallParser ?? 'auto', served.chatTemplateText);
  } catch (error) {
    await served.client.close();
    throw error;
  }
  const context: ServeContext = {
    served,
    scheduler,
    metrics,
    logprobsMode: options.logprobsMode ?? 'raw_logprobs',
    maxLogprobs: options.maxLogprobs ?? 20,
    dummyWeights: served.model.info.dummyWeights,
    toolParser,
  };
  const created = Math.floor(Date.now() / 1000);
  const server = http.createServer((request, response) => {
    handleRequest(context, created, options.apiKey, request, response).catch((error: unknown) =>
      sendError(response, ServeRequestError.from(error)),
    );
  });
  server.keepAliveTimeout = 5000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
    });
  } catch (error) {
    await served.client.close();
    const code = (error as NodeJS.ErrnoException).code;
    throw new BadInputError(
      'SERVE_LISTEN_FAILED',
      `cannot listen on ${options.host ?? '127.0.0.1'}:${options.port ?? 0} (${code ?? (error as Error).message}); pick another --port or --host`,
      { cause: error },
    );
  }
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${address.port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    baseUrl: `${url}/v1`,
    modelId: served.modelId,
    modelDir: served.modelDir,
    dummyWeights: context.dummyWeights,
    logprobsMode: context.logprobsMode,
    toolCallParser: toolParser?.name ?? null,
    counts: () => scheduler.counts,
    close: () => {
      closing ??= (async () => {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await scheduler.drained();
        await served.client.close();
      })();
      return closing;
    },
  };
}

async function readJson(request: http.IncomingMessage): Promise<unknown> {
  const pieces: Buffer[] = [];
  for await (const piece of request) pieces.push(piece as Buffer);
  const text = Buffer.concat(pieces).toString('utf8');
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new ServeRequestError(400, `The request body is not valid JSON: ${(error as Error).message}`);
  }
  // Tool schemas keep float-ness (`"minimum": 1.0` renders `1.0`, as vLLM's Python reads it); the
  // other fields stay plain numbers for validation.
  if (body !== null && typeof body === 'object' && Array.isArray((body as { tools?: unknown }).tools))
    (body as { tools: unknown }).tools = (parseJsonKeepingFloats(text) as { tools: unknown }).tools;
  return body;
}

/** Routes by method, for 405 on a known path with another method (as vLLM's router answers). */
const getRoutes = new Set(['/health', '/version', '/metrics', '/v1/models']);
const postRoutes = new Set(['/v1/completions', '/v1/chat/completions', '/tokenize', '/detokenize']);

/**
 * vLLM refuses a body that is not declared JSON: its validate_json_request raises a request
 * validation error, which its handler answers with 400 in the OpenAI error shape, type `Bad Request`.
 */
function checkJsonContentType(request: http.IncomingMessage): void {
  const mediaType = (request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (mediaType !== 'application/json')
    throw new ServeRequestError(400, "Unsupported Media Type: Only 'application/json' is allowed", null, 'Bad Request');
}

async function handleRequest(
  context: ServeContext,
  created: number,
  apiKey: string | undefined,
  request: http.IncomingMessage,
  response: http.ServerResponse,
): Promise<void> {
  const path = (request.url ?? '/').split('?')[0] ?? '/';
  const method = request.method ?? 'GET';
  // As vLLM's --api-key: only the OpenAI routes need the key; health, metrics, tokenize stay open.
  if (apiKey !== undefined && path.startsWith('/v1/') && request.headers.authorization !== `Bearer ${apiKey}`) {
    return sendJson(response, 401, { error: 'Unauthorized' });
  }
  if (method === 'GET' && path === '/health') return void response.writeHead(200).end();
  if (method === 'GET' && path === '/version') return sendJson(response, 200, { version: `hat-serve ${version}` });
  if (method === 'GET' && path === '/metrics') {
    const text = await context.metrics.text();
    response.writeHead(200, { 'content-type': context.metrics.contentType });
    return void response.end(text);
  }
  if (method === 'GET' && path === '/v1/models') return sendJson(response, 200, modelList(context, created));
  const allowed = getRoutes.has(path) ? 'GET' : postRoutes.has(path) ? 'POST' : undefined;
  if (allowed !== undefined && method !== allowed) {
    response.setHeader('allow', allowed);
    throw new ServeRequestError(405, 'Method Not Allowed');
  }
  if (method !== 'POST') throw new ServeRequestError(404, `no route ${method} ${path}`);
  if (postRoutes.has(path)) checkJsonContentType(request);
  // Aborted when the client goes away: its sequence stops at the next token.
  const closed = new AbortController();
  response.on('close', () => {
    if (!response.writableFinished) closed.abort();
  });
  let writer: SseWriter | undefined;
  const sse = (): SseWriter => (writer ??= new SseWriter(response));
  try {
    let body: unknown;
    if (path === '/v1/completions') body = await handleCompletion(context, await readJson(request), sse, closed.signal);
    else if (path === '/v1/chat/completions')
      body = await handleChatCompletion(context, await readJson(request), sse, closed.signal);
    else if (path === '/tokenize') body = handleTokenize(context, await readJson(request));
    else if (path === '/detokenize') body = handleDetokenize(context, await readJson(request));
    else throw new ServeRequestError(404, `no route ${method} ${path}`);
    if (!writer) sendJson(response, 200, body);
  } catch (error) {
    const failure = ServeRequestError.from(error);
    if (writer) writer.error(failure.body());
    else sendError(response, failure);
  }
}

/** `/v1/models`: vLLM's ModelList, plus what clients must know about the weights and logprobs (non-standard fields). */
function modelList(context: ServeContext, created: number): unknown {
  const { served } = context;
  return {
    object: 'list',
    data: [
      {
        id: served.modelId,
        object: 'model',
        created,
        owned_by: 'hat',
        root: served.modelDir,
        parent: null,
        max_model_len: served.maxModelLength,
        permission: [
          {
            id: `modelperm-${served.modelId}`,
            object: 'model_permission',
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: '*',
            group: null,
            is_blocking: false,
          },
        ],
        // Non-standard: random weights are labelled so every record downstream can say so.
        hat_dummy_weights: context.dummyWeights,
        // Non-standard: which distribution `logprobs` are of (vLLM's --logprobs-mode).
        logprobs_mode: context.logprobsMode,
        hat_tokenizer_fingerprint: served.model.info.tokenizerFingerprint,
        hat_tool_call_parser: context.toolParser?.name ?? null,
      },
    ],
  };
}

function sendJson(response: http.ServerResponse, status: number, body: unknown): void {
  if (response.destroyed || response.headersSent) return;
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function sendError(response: http.ServerResponse, error: ServeRequestError): void {
  if (response.headersSent) return void response.destroy();
  sendJson(response, error.status, error.body());
}
