import type { StageDeps } from '../../queues/stage-kit/define-stage';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { hashValue } from '../../shared/hash/hash';
import { withChat, type ChatRequest, type ChatResponse, type ModelClient } from '../../shared/models/model-client';
import { modelEndpointOf } from '../../shared/models/model-registry';
import type { EvalInput, EvalModel } from './eval-contract';

/**
 * The eval response cache: every answer a served model gave, stored in the artifact store under
 * the hash of what determines it, so re-evaluating an unchanged model asks it nothing.
 *
 * Key: the endpoint's identity (adapter, model id, and the served checkpoint's identity when the
 * config names it, else the endpoint URL; the adapter settings that change the request body:
 * sampling defaults, extraBody, hookMessages) and the exact request (messages, tools, sampling
 * parameters, seed, max tokens, stop, logprobs, extra body). Nothing else: labels, item
 * counts, parts, timeouts, concurrency, bootstrap settings and the rest of the config do not
 * invalidate it. Only answers are stored (a failed call is asked again next time).
 *
 * One object per call, written as soon as the answer arrives: a part that dies keeps what it had
 * finished, and its retry (or tomorrow's run) asks only the rest. In-process models (scripted,
 * onnx) are not cached: they cost no requests.
 */

export const RESPONSE_CACHE_SCHEMA_VERSION = 1;
/** Default location, under the artifact root (a run's store root, or `--out` for `hat stage`). */
export const defaultResponseCachePrefix = 'cache/eval-responses/';

export interface CacheCounts {
  hits: number;
  misses: number;
}

/** Where the cache lives: a store and a key prefix ('' or ending in '/'). */
export interface CacheLocation {
  store: ArtifactStore;
  prefix: string;
  /** The prefix as a URI, for reports. */
  uri: string;
}

/** The cache location of a config (`cache.prefix` URI, or `cache/eval-responses/` of the stage's store); undefined when the cache is off. */
export function cacheLocationOf(
  config: Pick<EvalInput, 'cache'>,
  deps: Pick<StageDeps, 'store' | 'openObject'>,
): CacheLocation | undefined {
  if (!config.cache.enabled) return undefined;
  if (config.cache.prefix === undefined)
    return {
      store: deps.store,
      prefix: defaultResponseCachePrefix,
      uri: `${deps.store.uriOf(defaultResponseCachePrefix.slice(0, -1))}/`,
    };
  const root = config.cache.prefix.replace(/\/+$/, '');
  const { store, key } = deps.openObject(root);
  const prefix = key === '' ? '' : `${key}/`;
  return { store, prefix, uri: `${root}/` };
}

/**
 * What identifies the answers of an endpoint: undefined for in-process adapters (not cached).
 * A served checkpoint's identity (`checkpoint`) stands for the weights wherever they are served;
 * without it the endpoint URL does, so two servers under one model name never share answers.
 */
export function endpointIdentityOf(
  model: EvalModel['model'],
  checkpoint: string | undefined,
): Record<string, unknown> | undefined {
  // Served over HTTP (any adapter describing an OpenAI-compatible server); in-process models are not cached.
  const endpoint = modelEndpointOf(model);
  if (endpoint?.kind !== 'openai-compatible' || endpoint.root === undefined) return undefined;
  const config = model as Record<string, unknown>;
  return {
    adapter: endpoint.adapter,
    model: config.model,
    ...(checkpoint !== undefined ? { checkpoint } : { baseUrl: endpoint.root }),
    sampling: config.sampling ?? {},
    extraBody: config.extraBody ?? {},
    hookMessages: config.hookMessages ?? 'system-messages',
  };
}

/** The key of one request to one endpoint. */
export function responseCacheKey(identity: Record<string, unknown>, request: ChatRequest): string {
  return hashValue({
    v: RESPONSE_CACHE_SCHEMA_VERSION,
    endpoint: identity,
    request: {
      messages: request.messages,
      tools: request.tools,
      temperature: request.temperature,
      topP: request.topP,
      topK: request.topK,
      maxTokens: request.maxTokens,
      seed: request.seed,
      stop: request.stop,
      logprobs: request.logprobs,
      topLogprobs: request.topLogprobs,
      extraBody: request.extraBody,
    },
  });
}

interface CachedResponse {
  schemaVersion: number;
  model: string;
  response: ChatResponse;
}

/**
 * The client with its answers cached: a hit returns the stored answer (its original timings and
 * usage) without a request; a miss asks the endpoint and stores the answer before returning it.
 */
export function withResponseCache(
  client: ModelClient,
  location: CacheLocation,
  identity: Record<string, unknown>,
  counts: CacheCounts,
): ModelClient {
  return withChat(client, async (request) => {
    const hash = responseCacheKey(identity, request);
    const key = `${location.prefix}${hash.slice(0, 2)}/${hash}.json`;
    if (await location.store.head(key)) {
      const stored = parseCached((await location.store.getBuffer(key)).toString('utf8'));
      if (stored) {
        counts.hits += 1;
        return stored.response;
      }
    }
    const response = await client.chat(request);
    counts.misses += 1;
    const record: CachedResponse = {
      schemaVersion: RESPONSE_CACHE_SCHEMA_VERSION,
      model: String(identity.model),
      response,
    };
    await location.store.put(key, `${JSON.stringify(record)}\n`, { contentType: 'application/json' });
    return response;
  });
}

/** A stored answer, or undefined when the object is not one (torn or foreign): then it is asked again and rewritten. */
function parseCached(text: string): CachedResponse | undefined {
  try {
    const value = JSON.parse(text) as Partial<CachedResponse>;
    if (
      value.schemaVersion !== RESPONSE_CACHE_SCHEMA_VERSION ||
      typeof value.response !== 'object' ||
      value.response === null ||
      typeof value.response.message !== 'object'
    )
      return undefined;
    return value as CachedResponse;
  } catch {
    return undefined;
  }
}
