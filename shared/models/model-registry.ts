import { z } from 'zod';
import { zodProblems } from '../config/zod-problems';
import { ProblemCollector, type Problem } from '../errors';
import type { Logger } from '../log/logger';
import type { ModelClient } from './model-client';
import type { ModelClock } from './model-clock';
import type { EndpointConfig, ModelEndpoint } from './model-endpoint';
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
  /**
   * What a config of this adapter points at (see model-endpoint.ts). It gets the config as
   * written (unchecked: a run config may hold `${...}` references) and returns undefined when the
   * config does not say enough (an HTTP adapter's config without a base URL).
   */
  endpoint(config: EndpointConfig): ModelEndpoint | undefined;
}

/**
 * A name configs give as `engine` (`vllm`, `sglang`, `dummy`; `onnx` is the `onnx` adapter's
 * entry): stage contracts that sample or score with token ids parse these configs themselves,
 * and the registry describes their endpoints like any adapter's.
 */
export interface ModelEngineEntry {
  endpoint(config: EndpointConfig): ModelEndpoint | undefined;
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

const engines = new Map<string, ModelEngineEntry>();

/**
 * Adds an `engine` name that is not an adapter (an adapter's own name already serves as an engine
 * name: `engine: onnx` is described by the `onnx` adapter). Registering a name twice with a
 * different entry is a programming error.
 */
export function registerModelEngine(name: string, entry: ModelEngineEntry): void {
  const existing = engines.get(name);
  if (existing && existing !== entry) throw new Error(`model engine "${name}" is already registered`);
  engines.set(name, entry);
}

/** Names a config may give as `engine`, sorted: the engine entries and every adapter. */
export function modelEngineNames(): string[] {
  return [...new Set([...engines.keys(), ...adapters.keys()])].sort();
}

/**
 * What a model config points at, described by its registry entry: `adapter: <name>` by that
 * adapter, `engine: <name>` by that engine entry or the adapter of that name. Undefined for a
 * value that is not a model config, names no registered entry, or does not say enough.
 */
export function modelEndpointOf(config: unknown): ModelEndpoint | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const record = config as EndpointConfig;
  if (typeof record.adapter === 'string') return adapters.get(record.adapter)?.endpoint(record);
  if (typeof record.engine === 'string')
    return (engines.get(record.engine) ?? adapters.get(record.engine))?.endpoint(record);
  return undefined;
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
