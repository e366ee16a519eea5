import { z } from 'zod';
import { zodProblems } from '../config/zod-problems';
import { ProblemCollector, type Problem } from '../errors';
import type { Logger } from '../log/logger';
import type { ModelClient } from './model-client';
import type { ModelClock } from './model-clock';
import { modelErrorCodes } from './model-errors';

/** What every adapter may use besides its config; adapters ignore what they do not need. */
export interface ModelClientDependencies {
  logger?: Logger;
  /** Wall clock and sleep for retry waits (tests inject one that records instead of waiting). */
  clock?: ModelClock;
  /** Uniform [0, 1) source for retry jitter and sampling; pass a seeded `rng.next` bound to its Rng. */
  random?: () => number;
  /** Environment to read API keys from. Default: process.env. */
  environment?: NodeJS.ProcessEnv;
  /** Where the config sits, for error messages (e.g. `run.yaml: models.teacher`). Default `model`. */
  configPath?: string;
  /** Adapter-specific services (e.g. the simulator's expert policy for `scripted`, a model cache for `onnx`). */
  services?: Readonly<Record<string, unknown>>;
}

/** How an adapter is built: its config schema (the only source of its config type) and a factory. */
export interface ModelAdapterFactory<Config extends { adapter: string } = { adapter: string }> {
  configSchema: z.ZodType<Config, { adapter: string }>;
  create(config: Config, dependencies: ModelClientDependencies): ModelClient;
}

/** Keys that must never sit in a model config: secrets come from the environment or files. */
const secretKeys = ['apiKey', 'api_key', 'authorization'];

const adapters = new Map<string, ModelAdapterFactory>();

/**
 * Adds an adapter under `name` (the config's `adapter` value). Registering a name twice with a
 * different factory is a programming error: two modules would fight over one backend.
 */
export function registerModelAdapter<Config extends { adapter: string }>(
  name: string,
  factory: ModelAdapterFactory<Config>,
): void {
  const existing = adapters.get(name);
  if (existing && existing !== (factory as unknown as ModelAdapterFactory)) {
    throw new Error(`model adapter "${name}" is already registered`);
  }
  adapters.set(name, factory);
}

/** Names of the registered adapters, sorted. */
export function modelAdapterNames(): string[] {
  return [...adapters.keys()].sort();
}

/** Every problem of a model config, with dot-paths under `path`, in one pass. */
export function modelConfigProblems(config: unknown, path = 'model', file?: string): Problem[] {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    return [
      { file, path, message: `must be an object with an "adapter" field (one of: ${modelAdapterNames().join(', ')})` },
    ];
  }
  const record = config as Record<string, unknown>;
  const problems: Problem[] = secretKeys
    .filter((key) => key in record)
    .map((key) => ({
      file,
      path: `${path}.${key}`,
      message:
        'secrets never go in config files; put the key in an environment variable named by apiKeyEnv, or a file named by apiKeyFile',
    }));
  const name = record.adapter;
  const factory = typeof name === 'string' ? adapters.get(name) : undefined;
  if (!factory) {
    problems.push({
      file,
      path: `${path}.adapter`,
      message: `${name === undefined ? 'is missing' : `"${String(name)}" is not a known adapter`}; use one of: ${modelAdapterNames().join(', ')}`,
    });
    return problems;
  }
  const withoutSecrets = Object.fromEntries(Object.entries(record).filter(([key]) => !secretKeys.includes(key)));
  const result = factory.configSchema.safeParse(withoutSecrets);
  if (!result.success) problems.push(...zodProblems(result.error, file, path));
  return problems;
}

/**
 * A model config as other configs embed it (run configs, stage configs): any registered adapter,
 * checked against that adapter's own schema, every problem with its path.
 */
export const modelConfigSchema = z.looseObject({ adapter: z.string().min(1) }).superRefine((value, context) => {
  for (const problem of modelConfigProblems(value, '')) {
    const path = problem.path === '(root)' ? [] : (problem.path ?? '').split('.').filter(Boolean);
    context.addIssue({ code: 'custom', message: problem.message, path });
  }
});
export type ModelConfig = z.infer<typeof modelConfigSchema>;

/**
 * Builds the client the config names. Throws BadInputError `MODEL_BAD_CONFIG` listing every
 * problem (unknown adapter, invalid fields, secrets in the config), or `MODEL_API_KEY_MISSING`
 * when the named key cannot be read.
 */
export function createModelClient(config: unknown, dependencies: ModelClientDependencies = {}): ModelClient {
  const path = dependencies.configPath ?? 'model';
  const collector = new ProblemCollector();
  collector.addAll(modelConfigProblems(config, path));
  collector.throwIfAny(modelErrorCodes.badConfig, 'The model config is invalid; fix the fields named below');
  const record = config as { adapter: string };
  const factory = adapters.get(record.adapter) as ModelAdapterFactory;
  return factory.create(factory.configSchema.parse(record), { ...dependencies, configPath: path });
}
