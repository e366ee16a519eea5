/** Tests import the local OpenAI-compatible server from here; it lives in shared/ so the demo and benchmarks can use it too. */
export * from '../../shared/models/testing/openai-test-server';
