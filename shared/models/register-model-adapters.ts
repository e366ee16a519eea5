import { scriptedAdapter } from '../simulator/policies/scripted-adapter';
import { httpModelEndpoint, inProcessModelEndpoint } from './model-endpoint';
import { registerModelAdapter, registerModelEngine, type ModelEngineEntry } from './model-registry';
import { onnxAdapter } from './onnx/onnx-adapter';
import { openAiAdapter } from './openai/openai-adapter';

/** `engine: vllm | sglang`: a served model sampled token-exact (rl policy, distill student) or scoring (distill teacher). */
const servedEngine = (name: 'vllm' | 'sglang'): ModelEngineEntry => ({
  endpoint: (config) => httpModelEndpoint(name, config, { kind: name, servesTokenIds: true, scoring: true }),
});
const vllmEngine = servedEngine('vllm');
const sglangEngine = servedEngine('sglang');

/** `engine: dummy`: a random-weight decoder generated in-process (demo and tests). */
const dummyEngine: ModelEngineEntry = {
  endpoint: (config) =>
    inProcessModelEndpoint('dummy', {
      ...(typeof config.modelId === 'string' ? { model: config.modelId } : {}),
      source: `dummy(${typeof config.tokenizer === 'string' ? config.tokenizer : 'qwen3'})`,
      simulated: true,
      servesTokenIds: true,
      scoring: true,
    }),
};

/**
 * Registers the built-in model adapters (`openai`, `onnx`, `scripted`) and the `engine` names
 * that are not adapters (`vllm`, `sglang`, `dummy`). Called once at start-up by every process
 * that builds model clients: `registerCatalogStages()` (CLI, workers, sandboxed processors),
 * benchmarks, and jest's setup file. Idempotent.
 */
export function registerModelAdapters(): void {
  registerModelAdapter('openai', openAiAdapter);
  registerModelAdapter('onnx', onnxAdapter);
  registerModelAdapter('scripted', scriptedAdapter);
  registerModelEngine('vllm', vllmEngine);
  registerModelEngine('sglang', sglangEngine);
  registerModelEngine('dummy', dummyEngine);
}
