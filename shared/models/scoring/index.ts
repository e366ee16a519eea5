/** Teacher scoring: token-id log-probabilities from in-process ONNX models, vLLM and SGLang. */
export * from './token-scorer';
export * from './scoring-endpoint';
export * from './remote-token-scorer';
export * from './vllm-prompt-logprobs';
export * from './sglang-generate-logprobs';
export * from './onnx-token-scorer';
export * from './tokenizer-agreement';
