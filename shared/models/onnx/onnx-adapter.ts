import { z } from 'zod';
import { inProcessModelEndpoint } from '../model-endpoint';
import type { ModelAdapterFactory } from '../model-registry';
import { samplingSettingsSchema } from '../openai/openai-model-config';
import { OnnxModelClient } from './onnx-model-client';
import { ensureDummyModel } from './ensure-dummy-model';

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

/** The `onnx` adapter; the model loads on the first call. */
export const onnxAdapter: ModelAdapterFactory<OnnxModelConfig> = {
  configSchema: onnxModelConfigSchema,
  create: (config) => {
    const { dummy, ...rest } = config;
    const modelDir = rest.modelDir ?? ensureDummyModel(dummy!.cacheDir, dummy!);
    return new OnnxModelClient({ ...rest, modelDir });
  },
  // Also describes `engine: onnx` configs (distill student and teacher): the same model directory, sampled and scored by token ids.
  endpoint: (config) =>
    inProcessModelEndpoint('onnx', {
      ...(typeof config.modelDir === 'string'
        ? { source: config.modelDir, tokenizer: { field: 'modelDir', source: { modelDir: config.modelDir } } }
        : {}),
      ...(typeof config.modelId === 'string' ? { model: config.modelId } : {}),
      simulated: config.dummy !== undefined,
      servesTokenIds: true,
      scoring: true,
    }),
};
