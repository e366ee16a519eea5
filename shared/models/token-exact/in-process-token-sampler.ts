import type { OnnxTokenScorer } from '../scoring/onnx-token-scorer';
import { reportedDistribution, type EngineLogprobsMode } from './logprob-distribution';
import type { SampledTokens, SampleRequest, TokenSampler } from './token-sampler';

/**
 * An in-process ONNX decoder as a token sampler: the same seed gives the same ids as `hat serve`
 * over the same model directory. Its logprobs are at the sampling temperature over the whole
 * vocabulary (`tempered_logprobs`), or raw when asked for (`raw_logprobs`: the decoder reports both).
 * Its tokenizer is the model directory's.
 */
export class InProcessTokenSampler implements TokenSampler {
  readonly engine = 'onnx' as const;
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly tokenizer: { modelDir: string };

  /** `owned`: the model is this sampler's alone, and `close` closes it (a shared one is closed by its cache). */
  constructor(
    readonly decoder: OnnxTokenScorer,
    readonly logprobsMode: EngineLogprobsMode = 'tempered_logprobs',
    private readonly options: { owned?: boolean } = {},
  ) {
    this.modelId = decoder.modelId;
    this.location = decoder.location;
    this.dummyWeights = decoder.dummyWeights;
    this.tokenizer = { modelDir: decoder.location };
  }

  async sample(request: SampleRequest): Promise<SampledTokens> {
    const startedAt = Date.now();
    const started = performance.now();
    const result = await this.decoder.exclusive((decoder) =>
      decoder.generate(request.promptIds, {
        maxNewTokens: request.maxTokens,
        temperature: request.sampling.temperature,
        topP: request.sampling.topP,
        topK: request.sampling.topK,
        seed: request.seed,
        stopTokenIds: [...request.stopTokenIds],
        logprobs: true,
        signal: request.signal,
      }),
    );
    const raw = this.logprobsMode === 'raw_logprobs';
    return {
      tokenIds: result.tokenIds,
      logprobs: (result.tokens ?? []).map((token) => (raw ? token.rawLogprob : token.logprob)),
      distribution: reportedDistribution('onnx', this.logprobsMode, request.sampling),
      finishReason: result.finishReason,
      startedAt,
      e2eMs: performance.now() - started,
    };
  }

  async close(): Promise<void> {
    if (this.options.owned) await this.decoder.close();
  }
}
