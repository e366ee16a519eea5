/** The in-process ONNX backend (its `onnx` adapter is registered by registerModelAdapters()). */
export * from './onnx-adapter';
export * from './onnx-model-client';
export * from './onnx-decoder';
export * from './dummy-decoder';
export * from './decoder-tokenizer';
export * from './chat-template-renderer';
export { logprobTemperatureOf, type SamplingParameters } from './token-sampler';
export { resolveTokenizerFiles, tokenizerSourceNames } from './tokenizer-source';
