import { resolve } from 'node:path';
import { z } from 'zod';
import { inProcessModelEndpoint } from '../model-endpoint';
import type { ModelAdapterFactory } from '../model-registry';
import { samplingSettingsSchema } from '../openai/openai-model-config';
import { OnnxModelClient } from './onnx-model-client';
import { ensureDummyModel } from './ensure-dummy-model';
import { inProcessTokenFields, inProcessTokenSampler, inProcessTokenScorer } from './in-process-token-models';

/** A random-weight decoder generated on first use (demo, tests, CPU latency replay); labelled as dummy everywhere. */
const dummyModelSchema = z
  .object({
    /** `qwen3`, `deepseek_v3`, `llama3_1`, `bytes`, or a directory with tokenizer files. Default qwen3. */
    tokenizer: z.string().min(1).default('qwen3'),
    layers: z.number().int().min(1).max(48).default(2),
    hidden: z.number().int().min(4).max(4096).default(64),
    heads: z.number().int().min(1).max(64).default(4),
    kvHeads: z.number().int().min(1).max(64).default(2),
    seed: z.string().min(1).default('dummy'),
    /** Where generated models are kept. Default .hat/models. */
    cacheDir: z.string().min(1).default('.hat/models'),
  })
  .strict();

/** Config of the `onnx` adapter: a decoder-only ONNX model directory run in-process. */
export const onnxModelConfigSchema = z
  .object({
    adapter: z.literal('onnx'),
    /** Directory with model.onnx (Optimum decoder naming), config.json, tokenizer.json, tokenizer_config.json. */
    modelDir: z.string().min(1).optional(),
    /** Instead of modelDir: generate (once) a random-weight decoder of this shape. */
    dummy: dummyModelSchema.optional(),
    /** Id reported as `model`. Default: the directory's name. */
    modelId: z.string().min(1).optional(),
    /** onnxruntime intra-op threads. Default: onnxruntime's choice. */
    intraOpThreads: z.number().int().positive().optional(),
    /** Most logits floats one forward call returns (prompts are fed in chunks). Default 16M. */
    maxLogitsFloats: z.number().int().positive().optional(),
    /** Prompt KV caches kept for prompts that extend them (a serving engine's prefix cache); 0 turns it off. Default 8. */
    prefixCacheEntries: z.number().int().min(0).max(1024).optional(),
    /** Sampling defaults for every request (maxTokens default 256, temperature default 1). */
    sampling: samplingSettingsSchema.default({}),
  })
  .strict()
  .refine((config) => (config.modelDir === undefined) !== (config.dummy === undefined), {
    message: 'give exactly one of modelDir (a model directory) or dummy (a generated random-weight model)',
    path: ['modelDir'],
  });
export type OnnxModelConfig = z.infer<typeof onnxModelConfigSchema>;

/** `adapter: onnx` sampled or scored by token ids (distill's student and teacher): a model directory run in-process. */
export const onnxTokenModelSchema = z
  .object({
    adapter: z.literal('onnx'),
    /** Directory with model.onnx, config.json, tokenizer.json, tokenizer_config.json (Optimum decoder layout). */
    modelDir: z.string().min(1),
    ...inProcessTokenFields,
  })
  .strict();
export type OnnxTokenModelConfig = z.infer<typeof onnxTokenModelSchema>;

/**
 * The `onnx` adapter: a chat client, and token-exact sampling and scoring of the same model
 * directory (its tokenizer is the directory's). The model loads on the first call.
 */
export const onnxAdapter: ModelAdapterFactory<OnnxModelConfig, OnnxTokenModelConfig, OnnxTokenModelConfig> = {
  chat: {
    configSchema: onnxModelConfigSchema,
    create: (config) => {
      const { dummy, ...rest } = config;
      const modelDir = rest.modelDir ?? ensureDummyModel(dummy!.cacheDir, dummy!);
      return new OnnxModelClient({ ...rest, modelDir });
    },
  },
  tokenSampler: {
    configSchema: onnxTokenModelSchema,
    create: (config, dependencies) => inProcessTokenSampler(config, resolve(config.modelDir), dependencies),
  },
  tokenScorer: {
    configSchema: onnxTokenModelSchema,
    create: (config, dependencies) => inProcessTokenScorer(config, resolve(config.modelDir), dependencies),
  },
  endpoint: (config) =>
    inProcessModelEndpoint('onnx', {
      ...(typeof config.modelDir === 'string'
        ? { source: config.modelDir, tokenizer: { field: 'modelDir', source: { modelDir: config.modelDir } } }
        : {}),
      ...(typeof config.modelId === 'string' ? { model: config.modelId } : {}),
      simulated: config.dummy !== undefined,
    }),
};
