import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** vLLM v1's metric names, as `/metrics` of `hat serve` spells them. */
export const serveMetricNames = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  promptTokens: 'vllm:prompt_tokens_total',
  generationTokens: 'vllm:generation_tokens_total',
  requestSuccess: 'vllm:request_success_total',
  timeToFirstToken: 'vllm:time_to_first_token_seconds',
  interTokenLatency: 'vllm:inter_token_latency_seconds',
  timePerOutputToken: 'vllm:time_per_output_token_seconds',
  e2eLatency: 'vllm:e2e_request_latency_seconds',
  queueTime: 'vllm:request_queue_time_seconds',
  requestPromptTokens: 'vllm:request_prompt_tokens',
  requestGenerationTokens: 'vllm:request_generation_tokens',
} as const;

// vLLM's bucket boundaries for these histograms.
const ttftBuckets = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
const tokenGapBuckets = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const latencyBuckets = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
const tokenCountBuckets = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

/** One finished request, for the counters and histograms. */
export interface FinishedRequest {
  promptTokens: number;
  generationTokens: number;
  finishReason: 'stop' | 'length' | 'abort';
  queueSeconds: number;
  /** Request arrival to the first generated token. */
  ttftSeconds?: number;
  e2eSeconds: number;
  /** Gaps between consecutive generated tokens. */
  tokenGapsSeconds: number[];
}

/** Prometheus metrics of `hat serve` under vLLM's names (labels `model_name`, `engine`), built with prom-client. */
export class ServeMetrics {
  readonly registry = new Registry();
  private readonly labels: { model_name: string; engine: string };
  private readonly running: Gauge<string>;
  private readonly waiting: Gauge<string>;
  private readonly promptTokens: Counter<string>;
  private readonly generationTokens: Counter<string>;
  private readonly requestSuccess: Counter<string>;
  private readonly ttft: Histogram<string>;
  private readonly interToken: Histogram<string>;
  private readonly timePerOutputToken: Histogram<string>;
  private readonly e2e: Histogram<string>;
  private readonly queue: Histogram<string>;
  private readonly requestPromptTokens: Histogram<string>;
  private readonly requestGenerationTokens: Histogram<string>;

  constructor(modelName: string) {
    this.labels = { model_name: modelName, engine: '0' };
    const registers = [this.registry];
    const labelNames = ['model_name', 'engine'];
    this.running = new Gauge({
      name: serveMetricNames.running,
      help: 'Number of requests in model execution batches.',
      labelNames,
      registers,
    });
    this.waiting = new Gauge({
      name: serveMetricNames.waiting,
      help: 'Number of requests waiting to be processed.',
      labelNames,
      registers,
    });
    this.promptTokens = new Counter({
      name: serveMetricNames.promptTokens,
      help: 'Number of prefill tokens processed.',
      labelNames,
      registers,
    });
    this.generationTokens = new Counter({
      name: serveMetricNames.generationTokens,
      help: 'Number of generation tokens processed.',
      labelNames,
      registers,
    });
    this.requestSuccess = new Counter({
      name: serveMetricNames.requestSuccess,
      help: 'Count of successfully processed requests.',
      labelNames: [...labelNames, 'finished_reason'],
      registers,
    });
    this.ttft = new Histogram({
      name: serveMetricNames.timeToFirstToken,
      help: 'Histogram of time to first token in seconds.',
      labelNames,
      buckets: ttftBuckets,
      registers,
    });
    this.interToken = new Histogram({
      name: serveMetricNames.interTokenLatency,
      help: 'Histogram of inter-token latency in seconds.',
      labelNames,
      buckets: tokenGapBuckets,
      registers,
    });
    this.timePerOutputToken = new Histogram({
      name: serveMetricNames.timePerOutputToken,
      help: 'Histogram of time per output token in seconds (deprecated vLLM name of the inter-token latency).',
      labelNames,
      buckets: tokenGapBuckets,
      registers,
    });
    this.e2e = new Histogram({
      name: serveMetricNames.e2eLatency,
      help: 'Histogram of e2e request latency in seconds.',
      labelNames,
      buckets: latencyBuckets,
      registers,
    });
    this.queue = new Histogram({
      name: serveMetricNames.queueTime,
      help: 'Histogram of time spent in WAITING phase for request.',
      labelNames,
      buckets: latencyBuckets,
      registers,
    });
    this.requestPromptTokens = new Histogram({
      name: serveMetricNames.requestPromptTokens,
      help: 'Number of prefill tokens processed.',
      labelNames,
      buckets: tokenCountBuckets,
      registers,
    });
    this.requestGenerationTokens = new Histogram({
      name: serveMetricNames.requestGenerationTokens,
      help: 'Number of generation tokens processed.',
      labelNames,
      buckets: tokenCountBuckets,
      registers,
    });
    this.running.set(this.labels, 0);
    this.waiting.set(this.labels, 0);
  }

  setCounts(counts: { waiting: number; running: number }): void {
    this.waiting.set(this.labels, counts.waiting);
    this.running.set(this.labels, counts.running);
  }

  record(request: FinishedRequest): void {
    this.promptTokens.inc(this.labels, request.promptTokens);
    if (request.generationTokens > 0) this.generationTokens.inc(this.labels, request.generationTokens);
    this.requestSuccess.inc({ ...this.labels, finished_reason: request.finishReason });
    if (request.ttftSeconds !== undefined) this.ttft.observe(this.labels, request.ttftSeconds);
    for (const gap of request.tokenGapsSeconds) {
      this.interToken.observe(this.labels, gap);
      this.timePerOutputToken.observe(this.labels, gap);
    }
    this.e2e.observe(this.labels, request.e2eSeconds);
    this.queue.observe(this.labels, request.queueSeconds);
    this.requestPromptTokens.observe(this.labels, request.promptTokens);
    this.requestGenerationTokens.observe(this.labels, request.generationTokens);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
