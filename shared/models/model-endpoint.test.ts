import { endpointReference } from './model-endpoint';
import { modelAdapterNames, modelEndpointOf } from './model-registry';

describe('model endpoints as the registry describes them', () => {
  test('adapter: vllm | sglang configs (rl policy, distill student and teacher) are token-id servers with their model list', () => {
    expect(modelAdapterNames('tokenSampler')).toEqual(expect.arrayContaining(['dummy', 'onnx', 'sglang', 'vllm']));
    expect(modelAdapterNames('tokenScorer')).toEqual(expect.arrayContaining(['dummy', 'onnx', 'sglang', 'vllm']));
    expect(modelAdapterNames('chat')).not.toContain('vllm');
    expect(modelEndpointOf({ adapter: 'vllm', baseUrl: 'http://teacher:8000/v1', model: 'Qwen/Qwen3-8B' })).toEqual({
      kind: 'vllm',
      adapter: 'vllm',
      baseUrl: 'http://teacher:8000/v1',
      root: 'http://teacher:8000',
      model: 'Qwen/Qwen3-8B',
      servesTokenIds: true,
      scoring: true,
      modelsUrl: 'http://teacher:8000/v1/models',
      metricsUrl: 'http://teacher:8000/metrics',
      simulated: false,
    });
    expect(
      modelEndpointOf({
        adapter: 'sglang',
        baseUrl: 'http://s:30000',
        model: 'm',
        apiKeyEnv: 'KEY',
        dummyWeights: true,
      }),
    ).toMatchObject({
      kind: 'sglang',
      modelsUrl: 'http://s:30000/v1/models',
      apiKey: { apiKeyEnv: 'KEY' },
      simulated: true,
    });
  });

  test("the tokenizer a config names is part of its description (preflight compares a distillation pair's)", () => {
    expect(
      modelEndpointOf({ adapter: 'vllm', baseUrl: 'http://t/v1', model: 'm', tokenizer: { preset: 'qwen3' } })
        ?.tokenizer,
    ).toEqual({ field: 'tokenizer', source: { preset: 'qwen3' } });
    expect(
      modelEndpointOf({ adapter: 'sglang', baseUrl: 'http://t/v1', model: 'm', tokenizerFingerprint: 'ab'.repeat(32) })
        ?.tokenizer,
    ).toEqual({ field: 'tokenizerFingerprint', fingerprint: 'ab'.repeat(32) });
    expect(modelEndpointOf({ adapter: 'onnx', modelDir: '/m' })?.tokenizer).toEqual({
      field: 'modelDir',
      source: { modelDir: '/m' },
    });
    expect(modelEndpointOf({ adapter: 'dummy', tokenizer: 'llama3_1' })?.tokenizer).toEqual({
      field: 'tokenizer',
      source: { preset: 'llama3_1' },
    });
    expect(modelEndpointOf({ adapter: 'vllm', baseUrl: 'http://t/v1', model: 'm' })?.tokenizer).toBeUndefined();
  });

  test('a config as written with the deprecated engine: spelling is described as its adapter (preflight reads configs as written)', () => {
    expect(modelEndpointOf({ engine: 'vllm', baseUrl: 'http://t/v1', model: 'm' })).toEqual(
      modelEndpointOf({ adapter: 'vllm', baseUrl: 'http://t/v1', model: 'm' }),
    );
    expect(modelEndpointOf({ engine: 'dummy', tokenizer: 'qwen3' })).toMatchObject({
      adapter: 'dummy',
      simulated: true,
    });
  });

  test('in-process and simulated models have no model list or metrics to ask', () => {
    expect(modelEndpointOf({ adapter: 'onnx', modelDir: '/models/qwen3-0.6b' })).toMatchObject({
      kind: 'in-process',
      adapter: 'onnx',
      source: '/models/qwen3-0.6b',
      servesTokenIds: true,
      simulated: false,
    });
    expect(modelEndpointOf({ adapter: 'dummy', tokenizer: 'qwen3' })).toMatchObject({
      kind: 'simulated',
      simulated: true,
    });
    expect(modelEndpointOf({ adapter: 'onnx', dummy: { tokenizer: 'bytes' } })).toMatchObject({ simulated: true });
    const scripted = modelEndpointOf({ adapter: 'scripted', policy: 'stochastic' });
    expect(scripted).toMatchObject({ kind: 'simulated', simulated: true });
    expect(scripted?.modelsUrl).toBeUndefined();
    expect(scripted?.metricsUrl).toBeUndefined();
  });

  test('values that are not model configs are not endpoints', () => {
    // A replay's recorded serving flags name an engine but no server.
    expect(modelEndpointOf({ engine: 'vllm', speculative: 'mtp', numSpeculativeTokens: 1 })).toBeUndefined();
    expect(modelEndpointOf({ adapter: 'gemini', baseUrl: 'http://x/v1' })).toBeUndefined();
    expect(modelEndpointOf({ engine: 'auto' })).toBeUndefined();
    expect(modelEndpointOf('openai')).toBeUndefined();
  });

  test('a pointer names an HTTP model by base URL and model id, an in-process one by adapter and source', () => {
    expect(
      endpointReference(modelEndpointOf({ adapter: 'openai', baseUrl: 'http://s:8000/v1', model: 'hat-sft' })!),
    ).toEqual({ endpoint: 'http://s:8000/v1', model: 'hat-sft' });
    expect(endpointReference(modelEndpointOf({ adapter: 'onnx', modelDir: '/m/sft' })!)).toEqual({
      endpoint: 'onnx:/m/sft',
      model: '/m/sft',
    });
    expect(endpointReference(modelEndpointOf({ adapter: 'scripted' })!)).toEqual({
      endpoint: 'scripted:',
      model: 'scripted',
    });
  });
});
