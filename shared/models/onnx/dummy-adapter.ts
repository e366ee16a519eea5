import { z } from 'zod';
import { tokenizerPresets, type ChatTokenizerSource } from '../../text/load-chat-tokenizer';
import { inProcessModelEndpoint } from '../model-endpoint';
import type { ModelAdapterFactory } from '../model-registry';
import { ensureDummyModel } from './ensure-dummy-model';
import {
  inProcessTokenFields,
  inProcessTokenSampler,
  inProcessTokenScorer,
  type InProcessTokenDependencies,
} from './in-process-token-models';

const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

/**
 * `adapter: dummy`: a random-weight decoder generated on first use into the model cache directory
 * (`makeDummyDecoder`), for demos and tests; sampled and scored by token ids. Its records and
 * stats carry `dummyWeights: true`.
 */
export const dummyTokenModelSchema = z
  .object({
    adapter: z.literal('dummy'),
    /** `qwen3` (default), `deepseek_v3`, `llama3_1`, `bytes`, or a directory with tokenizer files. */
    tokenizer: z.string().min(1).default('qwen3'),
    layers: z.number().int().min(1).max(48).default(2),
    hidden: z.number().int().min(4).max(4096).default(64),
    heads: z.number().int().min(1).max(64).default(4),
    kvHeads: z.number().int().min(1).max(64).default(2),
    /** Weight seed: the same seed and shape give the same model. Default "0". */
    seed: seedValue.default('0'),
    ...inProcessTokenFields,
  })
  .strict();
export type DummyTokenModelConfig = z.infer<typeof dummyTokenModelSchema>;

/** The generated model's directory (made once per shape and seed under the model cache directory). */
function dummyModelDirectory(config: DummyTokenModelConfig, dependencies: InProcessTokenDependencies): string {
  return ensureDummyModel(dependencies.modelCacheDir ?? '.hat/models', {
    tokenizer: config.tokenizer,
    layers: config.layers,
    hidden: config.hidden,
    heads: config.heads,
    kvHeads: config.kvHeads,
    seed: config.seed,
  });
}

/**
 * The `dummy` adapter: token-exact sampling and scoring of a generated random-weight decoder. It
 * has no chat client (a chat config generates one with `adapter: onnx, dummy: {...}`).
 */
export const dummyAdapter: ModelAdapterFactory<never, DummyTokenModelConfig, DummyTokenModelConfig> = {
  tokenSampler: {
    configSchema: dummyTokenModelSchema,
    create: (config, dependencies) =>
      inProcessTokenSampler(config, dummyModelDirectory(config, dependencies), dependencies),
  },
  tokenScorer: {
    configSchema: dummyTokenModelSchema,
    create: (config, dependencies) =>
      inProcessTokenScorer(config, dummyModelDirectory(config, dependencies), dependencies),
  },
  endpoint: (config) => {
    // `tokenizer`: a preset name or a directory with tokenizer files (names without a slash that are not presets are refused when generated).
    const name = typeof config.tokenizer === 'string' ? config.tokenizer : 'qwen3';
    const source: ChatTokenizerSource | undefined = Object.hasOwn(tokenizerPresets, name)
      ? { preset: name as keyof typeof tokenizerPresets }
      : name.includes('/')
        ? { modelDir: name }
        : undefined;
    return inProcessModelEndpoint('dummy', {
      ...(typeof config.modelId === 'string' ? { model: config.modelId } : {}),
      source: `tokenizer ${name}`,
      simulated: true,
      ...(source ? { tokenizer: { field: 'tokenizer', source } } : {}),
    });
  },
};
