import { basename, join } from 'node:path';
import { z } from 'zod';
import { hashValue } from '../../hash/hash';
import { OnnxTokenScorer } from '../scoring/onnx-token-scorer';
import type { ScoringEndpointDependencies } from '../scoring/scoring-endpoint';
import { InProcessTokenSampler } from '../token-exact/in-process-token-sampler';
import { OnnxModelClient } from './onnx-model-client';
import { readJsonObject } from './tokenizer-source';

/**
 * The token-exact side of the in-process adapters (`onnx`, `dummy`): the settings their sampler
 * and scorer configs share, the models they open, and the cache that shares a model directory's
 * session between a student and a teacher that are the same model.
 */

/** Settings every in-process token model takes (distill's student and teacher), besides where the model is. */
export const inProcessTokenFields = {
  /** Id recorded with the rollouts. Default: the model directory's name. */
  modelId: z.string().min(1).optional(),
  /** onnxruntime intra-op threads. Default: onnxruntime's choice. */
  intraOpThreads: z.number().int().positive().optional(),
  /** Sequences per forward batch (sampling and scoring). Default 8. */
  batchSize: z.number().int().positive().max(256).default(8),
  /** Logits floats one forward call may return (long prompts are fed in chunks). Default: chunks of at most 64 tokens, at most 16M floats. */
  maxLogitsFloats: z.number().int().positive().optional(),
};
export type InProcessTokenSettings = z.infer<z.ZodObject<typeof inProcessTokenFields>>;

/** Most prompt tokens fed per forward call when the vocabulary is small. */
const maxChunkTokens = 64;

/**
 * Logits per forward call: the decoder feeds long prompts in chunks of maxLogitsFloats /
 * (batch × vocabulary) tokens, and attention holds chunk × prompt scores per head. A small
 * vocabulary (a byte tokenizer) would otherwise take whole 10k-token prompts in one chunk and
 * gigabytes of attention, so chunks stay at most 64 tokens; large vocabularies keep the
 * decoder's 16M default.
 */
function defaultMaxLogitsFloats(modelDir: string, batchSize: number): number {
  const vocabularySize = (readJsonObject(join(modelDir, 'config.json')).vocab_size as number | undefined) ?? 1;
  return Math.max(1, Math.min(16 * 1024 * 1024, maxChunkTokens * batchSize * vocabularySize));
}

function openScorer(settings: InProcessTokenSettings, modelDir: string): OnnxTokenScorer {
  const modelId = settings.modelId ?? basename(modelDir);
  const maxLogitsFloats = settings.maxLogitsFloats ?? defaultMaxLogitsFloats(modelDir, settings.batchSize);
  return new OnnxTokenScorer(
    new OnnxModelClient({ modelDir, modelId, intraOpThreads: settings.intraOpThreads, maxLogitsFloats }),
    { modelDir, batchSize: settings.batchSize },
  );
}

/**
 * In-process models of one process, opened once per model directory and settings: a teacher that
 * is the student shares its session and queue. The models load on first use; `close` closes them.
 */
export class InProcessModels {
  private readonly scorers = new Map<string, OnnxTokenScorer>();

  scorer(settings: InProcessTokenSettings, modelDir: string): OnnxTokenScorer {
    const key = hashValue({
      modelDir,
      modelId: settings.modelId ?? basename(modelDir),
      intraOpThreads: settings.intraOpThreads,
      batchSize: settings.batchSize,
      maxLogitsFloats: settings.maxLogitsFloats ?? defaultMaxLogitsFloats(modelDir, settings.batchSize),
    });
    let scorer = this.scorers.get(key);
    if (!scorer) {
      scorer = openScorer(settings, modelDir);
      this.scorers.set(key, scorer);
    }
    return scorer;
  }

  async close(): Promise<void> {
    const scorers = [...this.scorers.values()];
    this.scorers.clear();
    await Promise.allSettled(scorers.map((scorer) => scorer.close()));
  }
}

/** What the in-process token models use besides their config. */
export interface InProcessTokenDependencies extends ScoringEndpointDependencies {
  /** Where `adapter: dummy` models are generated. Default `.hat/models`. */
  modelCacheDir?: string;
  /**
   * Shares sessions between models of one process (and closes them). Without it every sampler or
   * scorer opens its own model, which its `close` closes.
   */
  inProcessModels?: InProcessModels;
}

/** The scorer of the model in `modelDir`: shared through `inProcessModels` when given. */
export function inProcessTokenScorer(
  settings: InProcessTokenSettings,
  modelDir: string,
  dependencies: InProcessTokenDependencies,
): OnnxTokenScorer {
  return dependencies.inProcessModels?.scorer(settings, modelDir) ?? openScorer(settings, modelDir);
}

/** The sampler of the model in `modelDir` (tempered logprobs, and raw ones beside them). */
export function inProcessTokenSampler(
  settings: InProcessTokenSettings,
  modelDir: string,
  dependencies: InProcessTokenDependencies,
): InProcessTokenSampler {
  return new InProcessTokenSampler(inProcessTokenScorer(settings, modelDir, dependencies), 'tempered_logprobs', {
    owned: dependencies.inProcessModels === undefined,
  });
}
