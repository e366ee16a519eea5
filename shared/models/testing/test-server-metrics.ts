import { Counter, Gauge, Registry } from 'prom-client';
import type { Rng } from '../../random/rng';

/** The vLLM counters the test server exposes on `/metrics` (names as vLLM v1 spells them). */
export const vllmCounterNames = [
  'vllm:spec_decode_num_drafts_total',
  'vllm:spec_decode_num_draft_tokens_total',
  'vllm:spec_decode_num_accepted_tokens_total',
  'vllm:spec_decode_num_accepted_tokens_per_pos_total',
  'vllm:prompt_tokens_total',
  'vllm:generation_tokens_total',
  'vllm:request_success_total',
] as const;
export type VllmCounterName = (typeof vllmCounterNames)[number];

/** Simulated speculative decoding (MTP): each draft proposes `draftTokens`, accepted left to right. */
export interface SpecDecodeSimulation {
  draftTokens: number;
  /** Chance that each draft position is accepted, given the previous ones were. */
  acceptanceProbability: number;
}

/**
 * Prometheus text in vLLM's shape, built with prom-client. Tests set or increment counters
 * directly, and the server advances them for every response it streams (token totals, and the
 * spec-decode counters when a simulation is configured).
 */
export class TestServerMetrics {
  readonly registry = new Registry();
  private readonly counters = new Map<VllmCounterName, Counter<string>>();

  constructor(
    private readonly modelName: string,
    inFlight: () => number,
  ) {
    for (const name of vllmCounterNames) {
      const labelNames =
        name === 'vllm:spec_decode_num_accepted_tokens_per_pos_total'
          ? ['model_name', 'engine', 'position']
          : ['model_name', 'engine'];
      this.counters.set(
        name,
        new Counter({ name, help: `${name} (test server)`, labelNames, registers: [this.registry] }),
      );
    }
    new Gauge({
      name: 'vllm:num_requests_running',
      help: 'Requests in flight (test server)',
      labelNames: ['model_name', 'engine'],
      registers: [this.registry],
      collect() {
        this.set({ model_name: modelName, engine: '0' }, inFlight());
      },
    });
  }

  /** Sets a counter to `value` (tests use it to stage before/after readings). */
  set(name: VllmCounterName, value: number, labels: Record<string, string> = {}): void {
    const counter = this.counterOf(name);
    const full = this.labelsOf(labels);
    counter.remove(full);
    counter.inc(full, value);
  }

  increment(name: VllmCounterName, by = 1, labels: Record<string, string> = {}): void {
    if (by > 0) this.counterOf(name).inc(this.labelsOf(labels), by);
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Advances the counters for one finished response. */
  recordResponse(
    promptTokens: number,
    completionTokens: number,
    specDecode: SpecDecodeSimulation | undefined,
    rng: Rng,
  ): void {
    this.increment('vllm:prompt_tokens_total', promptTokens);
    this.increment('vllm:generation_tokens_total', completionTokens);
    this.increment('vllm:request_success_total', 1);
    if (!specDecode || specDecode.draftTokens <= 0) return;
    let emitted = 0;
    while (emitted < completionTokens) {
      let accepted = 0;
      while (accepted < specDecode.draftTokens && rng.chance(specDecode.acceptanceProbability)) accepted++;
      this.increment('vllm:spec_decode_num_drafts_total', 1);
      this.increment('vllm:spec_decode_num_draft_tokens_total', specDecode.draftTokens);
      this.increment('vllm:spec_decode_num_accepted_tokens_total', accepted);
      for (let position = 0; position < accepted; position++) {
        this.increment('vllm:spec_decode_num_accepted_tokens_per_pos_total', 1, { position: String(position) });
      }
      emitted += accepted + 1;
    }
  }

  private counterOf(name: VllmCounterName): Counter<string> {
    const counter = this.counters.get(name);
    if (!counter) throw new Error(`unknown test-server metric ${name}; known: ${vllmCounterNames.join(', ')}`);
    return counter;
  }

  private labelsOf(labels: Record<string, string>): Record<string, string> {
    return { model_name: this.modelName, engine: '0', ...labels };
  }
}
