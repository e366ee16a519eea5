/** Tool-call parsers, one per chat template format, selected from the template text or by name. */
export * from './tool-call-parser';
export * from './hermes-tool-parser';
export * from './qwen3-coder-tool-parser';
export * from './llama3-json-tool-parser';
export * from './select-tool-call-parser';
