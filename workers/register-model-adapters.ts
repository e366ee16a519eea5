import { scriptedAdapter } from '../shared/simulator/policies/scripted-adapter';
import { tokenizerPresets, type ChatTokenizerSource } from '../shared/text/load-chat-tokenizer';
import { httpModelEndpoint, inProcessModelEndpoint, type ModelEndpoint } from '../shared/models/model-endpoint';
import { registerModelAdapter, registerModelEngine, type ModelEngineEntry } from '../shared/models/model-registry';
import { onnxAdapter } from '../shared/models/onnx/onnx-adapter';
import { openAiAdapter } from '../shared/models/openai/openai-adapter';

/** `engine: vllm | sglang`: a served model sampled token-exact (rl policy, distill student) or scoring (distill teacher). */
const servedEngine = (name: 'vllm' | 'sglang'): ModelEngineEntry => ({
  endpoint: (config) => {
    const endpoint = httpModelEndpoint(name, config, { kind: name, servesTokenIds: true, scoring: true });
    const tokenizer: ModelEndpoint['tokenizer'] =
      typeof config.tokenizerFingerprint === 'string'
        ? { field: 'tokenizerFingerprint', fingerprint: config.tokenizerFingerprint }
        : typeof config.tokenizer === 'object' && config.tokenizer !== null
          ? { field: 'tokenizer', source: config.tokenizer }
          : undefined;
    return endpoint && tokenizer ? { ...endpoint, tokenizer } : endpoint;
  },
});
const vllmEngine = servedEngine('vllm');
const sglangEngine = servedEngine('sglang');

/** `engine: dummy`: a random-weight decoder generated in-process (demo and tests). */
const dummyEngine: ModelEngineEntry = {
  endpoint: (config) => {
    // `tokenizer`: a preset name or a directory with tokenizer files (names without a slash that are not presets are refused by the stage).
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
      servesTokenIds: true,
      scoring: true,
      ...(source ? { tokenizer: { field: 'tokenizer', source } } : {}),
    });
  },
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
