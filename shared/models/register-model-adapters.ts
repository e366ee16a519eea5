import { scriptedAdapter } from '../simulator/policies/scripted-adapter';
import { registerModelAdapter } from './model-registry';
import { onnxAdapter } from './onnx/onnx-adapter';
import { openAiAdapter } from './openai/openai-adapter';

/**
 * Registers the built-in model adapters (`openai`, `onnx`, `scripted`). Called once at start-up by
 * every process that builds model clients: `registerCatalogStages()` (CLI, workers, sandboxed
 * processors), benchmarks, and jest's setup file. Idempotent.
 */
export function registerModelAdapters(): void {
  registerModelAdapter('openai', openAiAdapter);
  registerModelAdapter('onnx', onnxAdapter);
  registerModelAdapter('scripted', scriptedAdapter);
}
