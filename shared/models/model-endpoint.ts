import type { ChatTokenizerSource } from '../text/load-chat-tokenizer';
import { serverRootOf } from './openai/openai-model-config';

/**
 * What a model config points at, as every adapter describes it. Code that must know an
 * endpoint's shape (run preflight, replay's metrics scrape, the gate's promoted-checkpoint
 * pointer, `hat checkpoint register`) asks this description (`modelEndpointOf` in
 * model-registry.ts) instead of reading `baseUrl` or switching on adapter and engine names, so
 * a new adapter gets those checks by describing itself once.
 */
export interface ModelEndpoint {
  /**
   * `openai-compatible`: an HTTP server speaking OpenAI chat (vLLM, SGLang, hosted APIs, a new
   * HTTP adapter); `vllm` / `sglang`: that server sampled or scored with token ids through its
   * own API; `in-process`: a model run in this process (onnxruntime); `simulated`: a scripted
   * policy or generated random weights (no model).
   */
  kind: 'openai-compatible' | 'vllm' | 'sglang' | 'in-process' | 'simulated';
  /** The registry name the config was described by (its `adapter`, or its `engine`). */
  adapter: string;
  /** The configured base URL (HTTP endpoints). */
  baseUrl?: string;
  /** The server's root (HTTP endpoints): the base URL without `/v1`, where version and info probes go. */
  root?: string;
  /** The model id the endpoint serves (HTTP) or the model's id or directory (in-process). */
  model?: string;
  /** Where an in-process model comes from (its directory, generated shape or policy), for labels. */
  source?: string;
  /**
   * Prompts go in and sampled tokens come back as token ids (token-exact sampling): its adapter
   * has a `tokenSampler`. Filled in by `modelEndpointOf` from the registry entry.
   */
  servesTokenIds: boolean;
  /** It returns logprobs of given token ids (a distillation teacher can score with it): its adapter has a `tokenScorer`. Filled in likewise. */
  scoring: boolean;
  /** `GET` lists the served models (`{"data": [{"id": ...}]}`): preflight and checkpoint registration ask it. */
  modelsUrl?: string;
  /** Prometheus metrics (`GET`): replay scrapes it before and after its window. */
  metricsUrl?: string;
  /** Where the API key comes from (names only; the key is never in a config). */
  apiKey?: { apiKeyEnv?: string; apiKeyFile?: string };
  /** No trained model answers (scripted policy, random weights): reports and gates say so. */
  simulated: boolean;
  /**
   * Its tokenizer as far as the config tells without asking the server (preflight compares a
   * distillation student's and teacher's): a fingerprint, or where to load it; `field` names the
   * config field that said it.
   */
  tokenizer?: { field: string; fingerprint?: string; source?: ChatTokenizerSource };
}

/** A config as written (run configs hold unchecked ones, e.g. with `${...}` references). */
export type EndpointConfig = Readonly<Record<string, unknown>>;

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * The tokenizer a served model's config names, as far as it tells without the server: a
 * `tokenizerFingerprint`, or a `tokenizer` to load (a preset or a model directory).
 */
function configuredTokenizer(config: EndpointConfig): ModelEndpoint['tokenizer'] {
  if (typeof config.tokenizerFingerprint === 'string')
    return { field: 'tokenizerFingerprint', fingerprint: config.tokenizerFingerprint };
  if (typeof config.tokenizer === 'object' && config.tokenizer !== null && !Array.isArray(config.tokenizer))
    return { field: 'tokenizer', source: config.tokenizer };
  return undefined;
}

/**
 * The description of an HTTP server at `config.baseUrl` with an OpenAI-compatible root: its
 * model list at `<root>/v1/models` and Prometheus metrics at `<root>/metrics` (vLLM and SGLang
 * serve both), and the tokenizer the config names (`tokenizer`, `tokenizerFingerprint`).
 * Undefined when the config has no base URL. An HTTP adapter's `endpoint` is usually this, with
 * its own `adapter` name.
 */
export function httpModelEndpoint(
  adapter: string,
  config: EndpointConfig,
  options: { kind?: 'openai-compatible' | 'vllm' | 'sglang' } = {},
): ModelEndpoint | undefined {
  const baseUrl = text(config.baseUrl);
  if (baseUrl === undefined) return undefined;
  const root = serverRootOf(baseUrl);
  const apiKeyEnv = text(config.apiKeyEnv);
  const apiKeyFile = text(config.apiKeyFile);
  const tokenizer = configuredTokenizer(config);
  return {
    kind: options.kind ?? 'openai-compatible',
    adapter,
    baseUrl,
    root,
    ...(text(config.model) !== undefined ? { model: text(config.model) } : {}),
    servesTokenIds: false,
    scoring: false,
    modelsUrl: `${root}/v1/models`,
    metricsUrl: `${root}/metrics`,
    ...(apiKeyEnv !== undefined || apiKeyFile !== undefined
      ? { apiKey: { ...(apiKeyEnv ? { apiKeyEnv } : {}), ...(apiKeyFile ? { apiKeyFile } : {}) } }
      : {}),
    simulated: config.dummyWeights === true,
    ...(tokenizer !== undefined ? { tokenizer } : {}),
  };
}

/** The description of a model run in this process (`source`: its directory or generated shape). */
export function inProcessModelEndpoint(
  adapter: string,
  fields: {
    model?: string;
    source?: string;
    simulated?: boolean;
    tokenizer?: ModelEndpoint['tokenizer'];
  },
): ModelEndpoint {
  return {
    kind: fields.simulated ? 'simulated' : 'in-process',
    adapter,
    ...(fields.model !== undefined ? { model: fields.model } : {}),
    ...(fields.source !== undefined ? { source: fields.source } : {}),
    servesTokenIds: false,
    scoring: false,
    simulated: fields.simulated ?? false,
    ...(fields.tokenizer !== undefined ? { tokenizer: fields.tokenizer } : {}),
  };
}

/**
 * How a pointer or report names the model: an HTTP endpoint by its base URL and model id, an
 * in-process one by `<adapter>:<source>` and its source.
 */
export function endpointReference(endpoint: ModelEndpoint): { endpoint: string; model: string } {
  if (endpoint.baseUrl !== undefined) return { endpoint: endpoint.baseUrl, model: endpoint.model ?? endpoint.adapter };
  return { endpoint: `${endpoint.adapter}:${endpoint.source ?? ''}`, model: endpoint.source ?? endpoint.adapter };
}
