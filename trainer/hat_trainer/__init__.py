"""HAT trainer: trains compact Qwen3 students from the pipeline's shards and exports them to ONNX."""
