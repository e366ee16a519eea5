import { z } from 'zod';
import { registerModelAdapter, type ModelAdapterFactory } from '../model-registry';
import { samplingSettingsSchema } from '../openai/openai-model-config';
import { OnnxModelClient } from './onnx-model-client';

/** Config of the `onnx` adapter: a decoder-only ONNX model directory run in-process. */
export const onnxModelConfigSchema = z
  .object({
    adapter: z.literal('onnx'),
    /** Directory with model.onnx (Optimum decoder naming), config.json, tokenizer.json, tokenizer_config.json. */
    modelDir: z.string().min(1),
    /** Id reported as `model`. Default: the directory's name. */
    modelId: z.string().min(1).optional(),
    /** onnxruntime intra-op threads. Default: onnxruntime's choice. */
    intraOpThreads: z.number().int().positive().optional(),
    /** Most logits floats one forward call returns (prompts are fed in chunks). Default 16M. */
    maxLogitsFloats: z.number().int().positive().optional(),
    /** Sampling defaults for every request (maxTokens default 256, temperature default 1). */
    sampling: samplingSettingsSchema.default({}),
  })
  .strict();
export type OnnxModelConfig = z.infer<typeof onnxModelConfigSchema>;

/** The `onnx` adapter; the model loads on the first call. */
export const onnxAdapter: ModelAdapterFactory<OnnxModelConfig> = {
  configSchema: onnxModelConfigSchema,
  create: (config) => new OnnxModelClient(config),
};

registerModelAdapter('onnx', onnxAdapter);
