/* eslint-disable @typescript-eslint/no-require-imports -- each adapter's module loads on the first lookup of its name */
import { registerModelAdapter } from '../shared/models/model-registry';

type ScriptedAdapterModule = typeof import('../shared/simulator/policies/scripted-adapter');
type DummyAdapterModule = typeof import('../shared/models/onnx/dummy-adapter');
type OnnxAdapterModule = typeof import('../shared/models/onnx/onnx-adapter');
type OpenAiAdapterModule = typeof import('../shared/models/openai/openai-adapter');
type SglangAdapterModule = typeof import('../shared/models/served/sglang-adapter');
type VllmAdapterModule = typeof import('../shared/models/served/vllm-adapter');

/*
 * The built-in adapters, each loaded when a config first names it (or a listing of adapter names
 * needs it): a process that never builds an ONNX model or an HTTP client does not load
 * onnxruntime, the tokenizers or undici at start-up. One function per name, made once, so
 * registering twice registers the same entries.
 */
const openai = () => (require('../shared/models/openai/openai-adapter') as OpenAiAdapterModule).openAiAdapter;
const onnx = () => (require('../shared/models/onnx/onnx-adapter') as OnnxAdapterModule).onnxAdapter;
const scripted = () =>
  (require('../shared/simulator/policies/scripted-adapter') as ScriptedAdapterModule).scriptedAdapter;
const dummy = () => (require('../shared/models/onnx/dummy-adapter') as DummyAdapterModule).dummyAdapter;
const vllm = () => (require('../shared/models/served/vllm-adapter') as VllmAdapterModule).vllmAdapter;
const sglang = () => (require('../shared/models/served/sglang-adapter') as SglangAdapterModule).sglangAdapter;

/**
 * Registers the built-in model adapters, one registry entry each with what it can do: `openai`
 * and `scripted` (chat), `onnx` (chat, token-exact sampling and scoring of a model directory),
 * `dummy` (token-exact sampling and scoring of a generated random-weight model), `vllm` and
 * `sglang` (token-exact sampling and scoring over the server's own API). Called once at start-up
 * by every process that builds model clients: `registerCatalogStages()` (CLI, workers, sandboxed
 * processors), benchmarks, and jest's setup file. Idempotent.
 */
export function registerModelAdapters(): void {
  registerModelAdapter('openai', openai);
  registerModelAdapter('onnx', onnx);
  registerModelAdapter('scripted', scripted);
  registerModelAdapter('dummy', dummy);
  registerModelAdapter('vllm', vllm);
  registerModelAdapter('sglang', sglang);
}
