import { z } from 'zod';
import { noteDeprecatedSpelling } from '../config/deprecated-spellings';
import { zodProblems } from '../config/zod-problems';
import { ProblemCollector, type Problem } from '../errors';
import type { Logger } from '../log/logger';
import type { ModelClient } from './model-client';
import type { ModelClock } from './model-clock';
import type { EndpointConfig, ModelEndpoint } from './model-endpoint';
import { modelErrorCodes } from './model-errors';
import type { InProcessTokenDependencies } from './onnx/in-process-token-models';
import type { TokenScorer } from './scoring/token-scorer';
import type { TokenSampler } from './token-exact/token-sampler';

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

/** What token samplers and scorers use besides their config (logger, key environment, model cache, ...). */
export type TokenModelDependencies = InProcessTokenDependencies;

/** The least every capability's config is: the registry name it was written with. */
export interface AdapterConfig {
  adapter: string;
}

/** Chat: what collect, eval, replay, judges and rl's chat policies call. */
export interface ModelChatFactory<Config extends AdapterConfig = AdapterConfig> {
  /** The config of a chat model of this adapter: the only source of its type. */
  configSchema: z.ZodType<Config, AdapterConfig>;
  create(config: Config, dependencies: ModelClientDependencies): ModelClient;
}

/** Token-exact sampling: prompts as token ids in, sampled ids and their logprobs out (rl's policy, distill's student). */
export interface TokenSamplerFactory<Config extends AdapterConfig = AdapterConfig> {
  configSchema: z.ZodType<Config, AdapterConfig>;
  /** Builds the sampler; nothing is sent yet (an in-process model loads on first use). */
  create(config: Config, dependencies: TokenModelDependencies): TokenSampler;
}

/** Scoring: the logprobs a model gives token ids it did not choose (distill's teacher). */
export interface TokenScorerFactory<Config extends AdapterConfig = AdapterConfig> {
  configSchema: z.ZodType<Config, AdapterConfig>;
  /** Builds the scorer; nothing is sent yet. Scorers opened through `inProcessModels` are closed by it. */
  create(config: Config, dependencies: TokenModelDependencies): TokenScorer;
}

/**
 * One registry entry: a backend a model config names by `adapter`. Each capability is an optional
 * member with its own config schema, so a stage asks the entry what it can do instead of
 * switching on names: a chat client (`chat`), token-exact sampling (`tokenSampler`), scoring
 * (`tokenScorer`). Every entry describes its endpoint (`endpoint`).
 */
export interface ModelAdapterFactory<
  ChatConfig extends AdapterConfig = AdapterConfig,
  SamplerConfig extends AdapterConfig = AdapterConfig,
  ScorerConfig extends AdapterConfig = AdapterConfig,
> {
  chat?: ModelChatFactory<ChatConfig>;
  tokenSampler?: TokenSamplerFactory<SamplerConfig>;
  tokenScorer?: TokenScorerFactory<ScorerConfig>;
  /**
   * What a config of this adapter points at (see model-endpoint.ts). It gets the config as
   * written (unchecked: a run config may hold `${...}` references) and returns undefined when the
   * config does not say enough (an HTTP adapter's config without a base URL).
   */
  endpoint(config: EndpointConfig): ModelEndpoint | undefined;
}

/** What a config position uses of its adapter. */
export type ModelCapability = 'chat' | 'tokenSampler' | 'tokenScorer';

const capabilityWords: Record<ModelCapability, string> = {
  chat: 'chat client',
  tokenSampler: 'token-exact sampler',
  tokenScorer: 'token scorer',
};

/** Keys that must never sit in a model config: secrets come from the environment or files. */
const secretKeys = ['apiKey', 'api_key', 'authorization'];

/**
 * A registry entry as registered: the adapter itself, or a function that returns it, called on the
 * first lookup of its name. The built-in adapters register that way (registerModelAdapters), so a
 * process loads the modules of an adapter (onnxruntime, tokenizers, HTTP clients) only when a
 * config names it.
 */
export type ModelAdapterEntry<
  ChatConfig extends AdapterConfig = AdapterConfig,
  SamplerConfig extends AdapterConfig = AdapterConfig,
  ScorerConfig extends AdapterConfig = AdapterConfig,
> =
  | ModelAdapterFactory<ChatConfig, SamplerConfig, ScorerConfig>
  | (() => ModelAdapterFactory<ChatConfig, SamplerConfig, ScorerConfig>);

const entries = new Map<string, ModelAdapterEntry>();
const loaded = new Map<string, ModelAdapterFactory>();

/** The adapter registered under `name`, loaded on first use; undefined for an unknown name. */
function adapterNamed(name: string): ModelAdapterFactory | undefined {
  const ready = loaded.get(name);
  if (ready) return ready;
  const entry = entries.get(name);
  if (entry === undefined) return undefined;
  const factory = typeof entry === 'function' ? entry() : entry;
  loaded.set(name, factory);
  return factory;
}

/**
 * Adds an adapter under `name` (the config's `adapter` value), or a function returning it (see
 * ModelAdapterEntry). Registering a name twice with a different entry is a programming error: two
 * modules would fight over one backend.
 */
export function registerModelAdapter<
  ChatConfig extends AdapterConfig,
  SamplerConfig extends AdapterConfig,
  ScorerConfig extends AdapterConfig,
>(name: string, entry: ModelAdapterEntry<ChatConfig, SamplerConfig, ScorerConfig>): void {
  const existing = entries.get(name);
  if (existing && existing !== (entry as unknown as ModelAdapterEntry)) {
    throw new Error(`model adapter "${name}" is already registered`);
  }
  entries.set(name, entry);
}

/** Names of the registered adapters (those with `capability`, when given), sorted. */
export function modelAdapterNames(capability?: ModelCapability): string[] {
  return [...entries.keys()]
    .filter((name) => capability === undefined || adapterNamed(name)![capability] !== undefined)
    .sort();
}

/** The registry name a config as written gives: `adapter`, or its deprecated spelling `engine`. */
function adapterNameOf(record: EndpointConfig): string | undefined {
  if (typeof record.adapter === 'string') return record.adapter;
  return typeof record.engine === 'string' ? record.engine : undefined;
}

/**
 * What a model config points at, described by its adapter's entry (`engine: <name>` is read as
 * `adapter: <name>`: preflight walks configs as written). Undefined for a value that is not a
 * model config, names no registered adapter, or does not say enough.
 */
export function modelEndpointOf(config: unknown): ModelEndpoint | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const record = config as EndpointConfig;
  const factory = adapterNamed(adapterNameOf(record) ?? '');
  const endpoint = factory?.endpoint(record);
  if (!factory || !endpoint) return undefined;
  // What it can do is the entry's to say: its capabilities, not its description, are the record.
  return {
    ...endpoint,
    servesTokenIds: factory.tokenSampler !== undefined,
    scoring: factory.tokenScorer !== undefined,
  };
}

/** What the adapter a config names can do (none for an unknown adapter). */
export function modelCapabilitiesOf(config: unknown): ModelCapability[] {
  const name = typeof config === 'object' && config !== null ? adapterNameOf(config as EndpointConfig) : undefined;
  const factory = name === undefined ? undefined : adapterNamed(name);
  return (['chat', 'tokenSampler', 'tokenScorer'] as const).filter((capability) => factory?.[capability]);
}

/** Every problem of a model config for `capability` (default chat), with dot-paths under `path`, in one pass. */
export function modelConfigProblems(
  config: unknown,
  path = 'model',
  file?: string,
  capability: ModelCapability = 'chat',
): Problem[] {
  const names = () => modelAdapterNames(capability).join(', ');
  if (typeof config !== 'object' || config === null || Array.isArray(config)) {
    return [{ file, path, message: `must be an object with an "adapter" field (one of: ${names()})` }];
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
  const factory = typeof name === 'string' ? adapterNamed(name) : undefined;
  if (!factory) {
    problems.push({
      file,
      path: `${path}.adapter`,
      message: `${name === undefined ? 'is missing' : `"${String(name)}" is not a known adapter`}; use one of: ${names()}`,
    });
    return problems;
  }
  const capable = factory[capability];
  if (!capable) {
    problems.push({
      file,
      path: `${path}.adapter`,
      message: `"${String(name)}" has no ${capabilityWords[capability]} (it has ${describeCapabilities(factory)}); use one of: ${names()}`,
    });
    return problems;
  }
  const result = capable.configSchema.safeParse(withoutSecrets(record));
  if (!result.success) problems.push(...zodProblems(result.error, file, path));
  return problems;
}

function describeCapabilities(factory: ModelAdapterFactory): string {
  const offered = (['chat', 'tokenSampler', 'tokenScorer'] as const).filter((capability) => factory[capability]);
  return offered.length > 0
    ? offered.map((capability) => `a ${capabilityWords[capability]}`).join(', ')
    : 'an endpoint description only';
}

function withoutSecrets(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([key]) => !secretKeys.includes(key)));
}

/** Problems as zod issues, under the path of the value being checked. */
function addProblems(context: z.RefinementCtx, problems: Problem[]): void {
  for (const problem of problems) {
    const path = problem.path === '(root)' ? [] : (problem.path ?? '').split('.').filter(Boolean);
    context.addIssue({ code: 'custom', message: problem.message, path });
  }
}

/**
 * A model config as other configs embed it (run configs, stage configs): any registered adapter
 * with a chat client, checked against that adapter's own schema, every problem with its path.
 */
export const modelConfigSchema = z.looseObject({ adapter: z.string().min(1) }).superRefine((value, context) => {
  addProblems(context, modelConfigProblems(value, ''));
});
export type ModelConfig = z.infer<typeof modelConfigSchema>;

/**
 * `engine: X` is how distill's student and teacher and rl's policy named their backend before
 * every model config said `adapter:`: read as `adapter: X`, noted for a warning at the config's
 * path; refused when `adapter` says otherwise.
 */
function readDeprecatedEngine(value: unknown, context: z.RefinementCtx): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !('engine' in value)) return value;
  const { engine, ...rest } = value as Record<string, unknown>;
  if ('adapter' in rest && rest.adapter !== engine) {
    context.addIssue({
      code: 'custom',
      path: ['engine'],
      message: `gives engine: ${String(engine)} and adapter: ${String(rest.adapter)}; engine is the old spelling of adapter, so say one: remove engine (or write adapter: ${String(engine)})`,
    });
    return value;
  }
  noteDeprecatedSpelling(
    value,
    'engine',
    `engine: ${String(engine)} is the old spelling of adapter; write adapter: ${String(engine)}`,
  );
  return { adapter: engine, ...rest };
}

/**
 * A model config for a position that uses one of `capabilities` of its adapter, the first the
 * adapter has (rl's policy: `['chat', 'tokenSampler']`, chat when the adapter has a chat client;
 * distill's student: `['tokenSampler']`). Checked against that capability's schema, every problem
 * with its path. The value is that schema's output (defaults filled), except for chat, which stays
 * as written (the client parses it when built). `engine:` is read as `adapter:` (deprecated).
 */
export function modelCapabilityConfigSchema(capabilities: readonly ModelCapability[]) {
  return z.preprocess(
    readDeprecatedEngine,
    z.looseObject({ adapter: z.string().min(1) }).transform((value, context) => {
      const capability = capabilityOf(value, capabilities);
      const problems = modelConfigProblems(value, '', undefined, capability);
      if (problems.length > 0) {
        addProblems(context, problems);
        return z.NEVER;
      }
      if (capability === 'chat') return value;
      return adapterNamed(value.adapter)![capability]!.configSchema.parse(withoutSecrets(value)) as AdapterConfig &
        Record<string, unknown>;
    }),
  );
}
export type CapabilityModelConfig = AdapterConfig & Record<string, unknown>;

/** The first of `capabilities` the config's adapter has (the first of all when it has none: its problems say so). */
export function capabilityOf(config: unknown, capabilities: readonly ModelCapability[]): ModelCapability {
  const offered = modelCapabilitiesOf(config);
  return capabilities.find((capability) => offered.includes(capability)) ?? capabilities[0];
}

/**
 * Parses a config for `capability`; BadInputError `MODEL_BAD_CONFIG` listing every problem
 * (unknown adapter, no such capability, invalid fields, secrets in the config).
 */
function parseFor<Capability extends ModelCapability>(
  config: unknown,
  capability: Capability,
  path: string,
): { factory: NonNullable<ModelAdapterFactory[Capability]>; config: AdapterConfig } {
  const collector = new ProblemCollector();
  collector.addAll(modelConfigProblems(config, path, undefined, capability));
  collector.throwIfAny(modelErrorCodes.badConfig, 'The model config is invalid; fix the fields named below');
  const record = config as Record<string, unknown> & AdapterConfig;
  const factory = adapterNamed(record.adapter)![capability]!;
  return {
    factory,
    config: factory.configSchema.parse(withoutSecrets(record)),
  };
}

/**
 * Builds the chat client the config names. Throws BadInputError `MODEL_BAD_CONFIG` listing every
 * problem, or `MODEL_API_KEY_MISSING` when the named key cannot be read.
 */
export function createModelClient(config: unknown, dependencies: ModelClientDependencies = {}): ModelClient {
  const path = dependencies.configPath ?? 'model';
  const parsed = parseFor(config, 'chat', path);
  return parsed.factory.create(parsed.config, { ...dependencies, configPath: path });
}

/** Builds the token-exact sampler the config names (its adapter's `tokenSampler`); errors as createModelClient. */
export function createTokenSampler(config: unknown, dependencies: TokenModelDependencies = {}): TokenSampler {
  const path = dependencies.configPath ?? 'model';
  const parsed = parseFor(config, 'tokenSampler', path);
  return parsed.factory.create(parsed.config, { ...dependencies, configPath: path });
}

/** Builds the token scorer the config names (its adapter's `tokenScorer`); errors as createModelClient. */
export function createTokenScorer(config: unknown, dependencies: TokenModelDependencies = {}): TokenScorer {
  const path = dependencies.configPath ?? 'model';
  const parsed = parseFor(config, 'tokenScorer', path);
  return parsed.factory.create(parsed.config, { ...dependencies, configPath: path });
}
