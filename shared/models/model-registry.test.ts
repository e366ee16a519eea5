import { z } from 'zod';
import { collectDeprecatedSpellings } from '../config/deprecated-spellings';
import type { ModelClient } from './model-client';
import { inProcessModelEndpoint } from './model-endpoint';
import {
  createModelClient,
  createTokenSampler,
  modelAdapterNames,
  modelCapabilityConfigSchema,
  modelConfigProblems,
  modelConfigSchema,
  registerModelAdapter,
} from './model-registry';

describe('model registry', () => {
  test('reports every problem of a config in one pass, with paths and what to do', () => {
    const problems = modelConfigProblems(
      { adapter: 'openai', baseUrl: 'ftp://x', apiKey: 'sk-1', timeoutMs: -1, extra: 1 },
      'models.teacher',
      'run.yaml',
    );
    const byPath = Object.fromEntries(problems.map((problem) => [problem.path, problem.message]));
    expect(Object.keys(byPath).sort()).toEqual(
      [
        'models.teacher',
        'models.teacher.apiKey',
        'models.teacher.baseUrl',
        'models.teacher.model',
        'models.teacher.timeoutMs',
      ].sort(),
    );
    expect(byPath['models.teacher.apiKey']).toMatch(/apiKeyEnv/);
    expect(byPath['models.teacher']).toMatch(/extra/);
    expect(problems.every((problem) => problem.file === 'run.yaml')).toBe(true);
  });

  test('an unknown adapter names the known ones; createModelClient throws MODEL_BAD_CONFIG', () => {
    expect(() => createModelClient({ adapter: 'gemini' }, { configPath: 'models.student' })).toThrow(
      /\[MODEL_BAD_CONFIG\][\s\S]*models\.student\.adapter: "gemini" is not a known adapter; use one of: .*openai/,
    );
    expect(modelConfigSchema.safeParse({ adapter: 'openai', baseUrl: 'http://x:1/v1', model: 'm' }).success).toBe(true);
    expect(
      modelConfigSchema
        .safeParse({ adapter: 'openai', baseUrl: 'http://x:1/v1' })
        .error?.issues.map((issue) => issue.path.join('.')),
    ).toEqual(['model']);
  });

  test('adapters register by name with their own config schema', async () => {
    const echoClient = (prefix: string): ModelClient => ({
      specificationVersion: 'v1',
      provider: 'echo-test',
      modelId: 'echo',
      chat: async (request) => ({
        message: { role: 'assistant', content: `${prefix}${request.messages.at(-1)?.content ?? ''}` },
        finishReason: 'stop',
        usage: { promptTokens: 0, completionTokens: 0 },
        timings: { startedAt: 0, queueMs: 0, ttftMs: 0, e2eMs: 0 },
        model: 'echo',
        attempts: 1,
      }),
    });
    registerModelAdapter('echo-test', {
      chat: {
        configSchema: z.object({ adapter: z.literal('echo-test'), prefix: z.string().default('> ') }).strict(),
        create: (config) => echoClient(config.prefix),
      },
      endpoint: () => inProcessModelEndpoint('echo-test', {}),
    });
    expect(modelAdapterNames()).toEqual(expect.arrayContaining(['echo-test', 'openai']));
    const client = createModelClient({ adapter: 'echo-test' });
    expect((await client.chat({ messages: [{ role: 'user', content: 'hi' }] })).message.content).toBe('> hi');
    expect(modelConfigProblems({ adapter: 'echo-test', prefix: 3 })).toHaveLength(1);
    expect(() =>
      registerModelAdapter('echo-test', {
        chat: { configSchema: z.object({ adapter: z.literal('echo-test') }), create: () => echoClient('') },
        endpoint: () => undefined,
      }),
    ).toThrow(/already registered/);
  });

  test('a position asks the entry for the capability it uses; an adapter without it is refused, naming those with it', () => {
    const sampler = modelCapabilityConfigSchema(['tokenSampler']);
    expect(sampler.safeParse({ adapter: 'openai', baseUrl: 'http://x:1/v1', model: 'm' }).error?.issues).toEqual([
      expect.objectContaining({
        path: ['adapter'],
        message: expect.stringMatching(
          /^"openai" has no token-exact sampler \(it has a chat client\); use one of: .*dummy.*onnx.*sglang.*vllm/,
        ),
      }),
    ]);
    expect(() => createModelClient({ adapter: 'vllm', baseUrl: 'http://x:1/v1', model: 'm' })).toThrow(
      /\[MODEL_BAD_CONFIG\][\s\S]*model\.adapter: "vllm" has no chat client \(it has a token-exact sampler, a token scorer\)/,
    );
    // Parsed by the capability's own schema: its defaults filled in.
    expect(sampler.parse({ adapter: 'vllm', baseUrl: 'http://x:1/v1', model: 'm' })).toMatchObject({
      adapter: 'vllm',
      toolCallParser: 'auto',
      dummyWeights: false,
    });
    expect(createTokenSampler({ adapter: 'sglang', baseUrl: 'http://x:1', model: 'm' })).toMatchObject({
      engine: 'sglang',
      logprobsMode: 'tempered_logprobs',
      location: 'http://x:1/generate',
    });
    // A chat-first position (rl's policy) keeps a chat config as written and samples a token-only adapter.
    const policy = modelCapabilityConfigSchema(['chat', 'tokenSampler']);
    expect(policy.parse({ adapter: 'scripted' })).toEqual({ adapter: 'scripted' });
    expect(policy.parse({ adapter: 'vllm', baseUrl: 'http://x:1/v1', model: 'm' })).toMatchObject({
      toolCallParser: 'auto',
    });
  });

  test('engine: X is read as the deprecated spelling of adapter: X, noted at its path; both with different values is refused', () => {
    const stage = z.object({ student: modelCapabilityConfigSchema(['tokenSampler']) });
    const written = { student: { engine: 'vllm', baseUrl: 'http://x:1/v1', model: 'm', logprobsMode: 'raw_logprobs' } };
    const { result, spellings } = collectDeprecatedSpellings(written, () => stage.safeParse(written));
    expect(result.data?.student).toMatchObject({ adapter: 'vllm', logprobsMode: 'raw_logprobs' });
    expect(result.data?.student).not.toHaveProperty('engine');
    expect(spellings).toEqual([
      { path: ['student', 'engine'], message: 'engine: vllm is the old spelling of adapter; write adapter: vllm' },
    ]);
    // The same value twice is only the old spelling; two different ones cannot both be meant.
    expect(stage.safeParse({ student: { ...written.student, adapter: 'vllm' } }).success).toBe(true);
    expect(stage.safeParse({ student: { ...written.student, adapter: 'sglang' } }).error?.issues).toEqual([
      expect.objectContaining({
        path: ['student', 'engine'],
        message: expect.stringMatching(/^gives engine: vllm and adapter: sglang; .*remove engine/),
      }),
    ]);
    // Outside a collector (a worker parsing job data) the old spelling is still read, silently.
    expect(stage.parse(written).student).toMatchObject({ adapter: 'vllm' });
  });
});
