import { scriptedAdapter } from '../shared/simulator/policies/scripted-adapter';
import { registerModelAdapter } from '../shared/models/model-registry';
import { dummyAdapter } from '../shared/models/onnx/dummy-adapter';
import { onnxAdapter } from '../shared/models/onnx/onnx-adapter';
import { openAiAdapter } from '../shared/models/openai/openai-adapter';
import { sglangAdapter } from '../shared/models/served/sglang-adapter';
import { vllmAdapter } from '../shared/models/served/vllm-adapter';

/**
 * Registers the built-in model adapters, one registry entry each with what it can do: `openai`
 * and `scripted` (chat), `onnx` (chat, token-exact sampling and scoring of a model directory),
 * `dummy` (token-exact sampling and scoring of a generated random-weight model), `vllm` and
 * `sglang` (token-exact sampling and scoring over the server's own API). Called once at start-up
 * by every process that builds model clients: `registerCatalogStages()` (CLI, workers, sandboxed
 * processors), benchmarks, and jest's setup file. Idempotent.
 */
export function registerModelAdapters(): void {
  registerModelAdapter('openai', openAiAdapter);
  registerModelAdapter('onnx', onnxAdapter);
  registerModelAdapter('scripted', scriptedAdapter);
  registerModelAdapter('dummy', dummyAdapter);
  registerModelAdapter('vllm', vllmAdapter);
  registerModelAdapter('sglang', sglangAdapter);
}
