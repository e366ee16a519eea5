import type { ChatMessage, ToolSpec, AssistantMessage } from '../trajectory/messages';

/** Sampling settings recorded with every trajectory. */
export interface SamplingSettings {
  temperature?: number;
  topP?: number;
  topK?: number;
  maxTokens?: number;
  seed?: number;
  stop?: string[];
}

export interface ChatRequest extends SamplingSettings {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  /** Ask for per-token log-probabilities of the output (when the backend can). */
  logprobs?: boolean;
  topLogprobs?: number;
  signal?: AbortSignal;
  /** Called for every streamed chunk that carries choices (for progress and latency metrics). */
  onChunk?: (chunk: StreamChunkEvent) => void;
  /**
   * Backend-specific request fields merged last into the request body (e.g. vLLM's
   * `chat_template_kwargs`, `tool_choice`). Overrides the adapter config's `extraBody`.
   */
  extraBody?: Record<string, unknown>;
  /**
   * The same request serialized ahead of time by this client's `prepare` (a replay builds its
   * forced-history bodies before the measured window). Ignored by a client that did not make it.
   */
  prepared?: PreparedChatRequest;
}

/** A request body a client serialized ahead of time (`ModelClient.prepare`); opaque to callers. */
export interface PreparedChatRequest {
  /** The client that made it: another client ignores it. */
  readonly owner: object;
  readonly body: Buffer;
}

export interface StreamChunkEvent {
  /** Milliseconds since the request was sent. */
  atMs: number;
  /** Text and tool-call argument characters in this chunk. */
  contentDelta?: string;
}

export interface TokenLogprob {
  token: string;
  tokenId?: number;
  logprob: number;
  /** The token's UTF-8 bytes, when the server sends them (OpenAI chat `logprobs.content[].bytes`). */
  bytes?: number[];
  top?: Array<{ token: string; tokenId?: number; logprob: number }>;
}

export interface CallTimings {
  /** Wall-clock epoch ms when the request was sent (after any client-side gate). */
  startedAt: number;
  /** Time waiting for the client-side concurrency/rate gate before sending, ms. */
  queueMs: number;
  /** Time to the first choices-bearing chunk, ms (vLLM TTFT). Equals e2eMs for non-streaming backends. */
  ttftMs: number;
  /** Time to the last choices-bearing chunk, ms (vLLM E2EL). */
  e2eMs: number;
  /**
   * Time to the first chunk carrying answer text (`delta.content`; not reasoning, not tool-call
   * arguments), ms: when a voice could start speaking. Absent when the answer had no text.
   */
  firstContentMs?: number;
  /** When the request had been written to the socket, ms after sending (HTTP clients that know it). */
  writtenMs?: number;
  /** Gaps between consecutive choices-bearing chunks, ms (vLLM ITL). */
  itlMs?: number[];
  /** Time spent on failed attempts and retry waits before the attempt these timings describe, ms. */
  retryMs?: number;
  /** Choices-bearing chunks received (one chunk may carry several tokens with speculative decoding). */
  chunkCount?: number;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from the server's prefix cache, when it reports them. */
  cachedPromptTokens?: number;
  /** True when the server reported no usage and these counts are estimates (chunks, not tokens). */
  estimated?: boolean;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'error' | 'unknown';

export interface ChatResponse {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Usage;
  timings: CallTimings;
  logprobs?: TokenLogprob[];
  /** Model id the server reported. */
  model: string;
  /** Attempts made (1 when no retry was needed). */
  attempts: number;
}

/**
 * A model backend. Adapters (`openai`, `scripted`, `onnx`) are chosen by name from config.
 * `chat` throws TransientError for faults worth retrying after the adapter's own retries are
 * spent, and BadInputError for requests that can never succeed.
 */
export interface ModelClient {
  readonly specificationVersion: 'v1';
  /** Adapter name: 'openai' | 'scripted' | 'onnx'. */
  readonly provider: string;
  readonly modelId: string;
  /** Sampling defaults applied to every request (recorded with trajectories). */
  readonly sampling?: SamplingSettings;
  /** True for simulation policies and random-weight models (recorded as `model.simulated` in trajectories). */
  readonly simulated?: boolean;
  chat(request: ChatRequest): Promise<ChatResponse>;
  /** Serializes a request ahead of time (HTTP clients), so that `chat` spends no CPU building it. */
  prepare?(request: ChatRequest): PreparedChatRequest;
  close?(): Promise<void>;
}

/** The same client with another `chat` (a wrapper that times, retries or adds request fields); `prepare` is not carried over. */
export function withChat(client: ModelClient, chat: ModelClient['chat']): ModelClient {
  return {
    specificationVersion: 'v1',
    provider: client.provider,
    modelId: client.modelId,
    ...(client.sampling ? { sampling: client.sampling } : {}),
    ...(client.simulated !== undefined ? { simulated: client.simulated } : {}),
    ...(client.close ? { close: () => client.close!() } : {}),
    chat,
  };
}
