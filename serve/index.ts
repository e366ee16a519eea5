/** `hat serve`: a vLLM-compatible HTTP server over an in-process ONNX model. */
export * from './serve-server';
export * from './serve-model';
export { logprobsModes, type LogprobsMode } from './serve-engine';
export { serveMetricNames } from './serve-metrics';
