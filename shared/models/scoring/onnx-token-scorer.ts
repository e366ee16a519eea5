import { isDummyModel } from '../onnx/dummy-decoder';
import type { OnnxDecoder } from '../onnx/onnx-decoder';
import type { OnnxModelClient } from '../onnx/onnx-model-client';
import type { CompletionScores, ScoreOptions, TokenScoreRequest, TokenScorer } from './token-scorer';

/** Sequences per scoring batch: bounds the logits one forward pass holds. Default 8. */
const defaultBatchSize = 8;

/**
 * An in-process ONNX model as a scorer (OnnxDecoder.scoreBatch: one pass over prompt +
 * completion per sequence, at any temperature). Work on one model runs one call at a time
 * (`exclusive`), which samplers of the same model share: CPU inference gains nothing from
 * interleaving, and a queue keeps the order deterministic.
 */
export class OnnxTokenScorer implements TokenScorer {
  readonly engine = 'onnx' as const;
  readonly modelId: string;
  readonly location: string;
  readonly dummyWeights: boolean;
  readonly tokenizer: { modelDir: string };
  private gate: Promise<unknown> = Promise.resolve();

  /** The model loads on first use. */
  constructor(
    readonly client: OnnxModelClient,
    private readonly options: { modelDir: string; batchSize?: number },
  ) {
    this.modelId = client.modelId;
    this.location = options.modelDir;
    this.dummyWeights = isDummyModel(options.modelDir);
    this.tokenizer = { modelDir: options.modelDir };
  }

  /** Sequences per forward batch, sampling and scoring. */
  get batchSize(): number {
    return this.options.batchSize ?? defaultBatchSize;
  }

  /** The loaded decoder (loading it on first use). */
  async load(): Promise<OnnxDecoder> {
    return (await this.client.load()).decoder;
  }

  /** Runs `work` on the decoder after every earlier call on this model finished (a failure does not block the next). */
  exclusive<T>(work: (decoder: OnnxDecoder) => Promise<T>): Promise<T> {
    const run = this.gate.then(
      async () => work(await this.load()),
      async () => work(await this.load()),
    );
    this.gate = run.catch(() => undefined);
    return run;
  }

  async score(requests: readonly TokenScoreRequest[], options: ScoreOptions): Promise<CompletionScores[]> {
    const batchSize = this.batchSize;
    const scores: CompletionScores[] = [];
    for (let start = 0; start < requests.length; start += batchSize) {
      const batch = requests.slice(start, start + batchSize);
      const results = await this.exclusive((decoder) =>
        decoder.scoreBatch(batch, {
          temperature: options.temperature,
          topLogprobs: options.topK,
          signal: options.signal,
        }),
      );
      for (const result of results) {
        scores.push({
          logprobs: result.tokens.map((token) => token.logprob),
          ...(options.topK > 0 ? { top: result.tokens.map((token) => token.top ?? []) } : {}),
        });
      }
    }
    return scores;
  }

  async close(): Promise<void> {
    await this.gate.catch(() => undefined);
    await this.client.close();
  }
}
