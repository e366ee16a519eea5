import { z } from 'zod';
import type { ModelClient } from './model-client';
import { inProcessModelEndpoint } from './model-endpoint';
import {
  createModelClient,
  modelAdapterNames,
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
      configSchema: z.object({ adapter: z.literal('echo-test'), prefix: z.string().default('> ') }).strict(),
      create: (config) => echoClient(config.prefix),
      endpoint: () => inProcessModelEndpoint('echo-test', {}),
    });
    expect(modelAdapterNames()).toEqual(expect.arrayContaining(['echo-test', 'openai']));
    const client = createModelClient({ adapter: 'echo-test' });
    expect((await client.chat({ messages: [{ role: 'user', content: 'hi' }] })).message.content).toBe('> hi');
    expect(modelConfigProblems({ adapter: 'echo-test', prefix: 3 })).toHaveLength(1);
    expect(() =>
      registerModelAdapter('echo-test', {
        configSchema: z.object({ adapter: z.literal('echo-test') }),
        create: () => echoClient(''),
        endpoint: () => undefined,
      }),
    ).toThrow(/already registered/);
  });
});
