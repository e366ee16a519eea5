import http from 'node:http';
import { env as onnxEnv } from 'onnxruntime-node';
import https from 'node:https';
import { z } from 'zod';
import type { ModelClient } from '../../shared/models/model-client';

/** Serving flags the server cannot tell (engine flags such as the speculative method and number of speculative tokens). */
export const servingFlagsSchema = z.record(z.string().min(1), z.union([z.string(), z.number(), z.boolean()]));

/** What the server says about itself, read before the replay (each field absent when it did not say). */
export const serverInfoSchema = z.object({
  /** `vllm`, `sglang`, the test server, or what `/v1/models` names as owner. */
  engine: z.string().optional(),
  /** `/version` (vLLM and SGLang answer `{"version": ...}`). */
  version: z.string().optional(),
  /** `/v1/models`: served model ids with their context length (`max_model_len`). */
  models: z.array(z.object({ id: z.string(), maxModelLen: z.number().optional() })).default([]),
  /** Speculative-decoding metric names `/metrics` exposed after warmup (vLLM counters `vllm:spec_decode_*`, SGLang gauges `sglang:spec_*`). */
  specDecodeMetrics: z.array(z.string()).default([]),
  /**
   * Settings the server reports: SGLang `/get_server_info`'s `speculative_*` (algorithm, steps,
   * draft tokens); the in-process onnx backend's model type, layers, vocabulary, logits_to_keep.
   */
  settings: servingFlagsSchema.optional(),
  /** Endpoints that did not answer, with why (the report says what it could not read). */
  unreadable: z.array(z.string()).default([]),
});
export type ServerInfo = z.infer<typeof serverInfoSchema>;

/** What was measured: shown on top of every report so a simulated target is never mistaken for a model. */
export const targetInfoSchema = z.object({
  /** One line: provider, model, endpoint and, for anything that is not a real model, what it is. */
  label: z.string(),
  provider: z.string(),
  modelId: z.string(),
  /** Server root for HTTP targets. */
  endpoint: z.string().optional(),
  /** The client says it is a simulation policy or random-weight model. */
  simulated: z.boolean(),
  /** An in-process model whose weights are random (its latencies say nothing about a real model's output). */
  dummyWeights: z.boolean(),
  /** The endpoint is the project's local OpenAI-compatible test server (scripted answers and delays). */
  testServer: z.boolean(),
  /** Set when the target is not a real model. */
  warning: z.string().optional(),
  /** What ran it, as configured (`target.hardware`, e.g. "1× NVIDIA H20 96 GB"): the server cannot say. */
  hardware: z.string().optional(),
  /** Engine flags as configured (`target.serving`, e.g. { speculative: mtp, numSpeculativeTokens: 1 }). */
  serving: servingFlagsSchema.optional(),
  /** What the server said about itself (HTTP targets). */
  server: serverInfoSchema.optional(),
});
export type TargetInfo = z.infer<typeof targetInfoSchema>;

/** What the test server's `/v1/models` says it is (`owned_by`). */
const testServerOwner = 'hat-test-server';

/**
 * Describes the target: the client's own `simulated` flag, `dummyWeights` from clients that can
 * report their model (`info()`, e.g. onnx), and for HTTP targets whether `/v1/models` is the local
 * test server's. `label` overrides the headline, never the warning.
 */
export async function describeTarget(
  client: ModelClient,
  options: {
    endpoint?: string;
    label?: string;
    hardware?: string;
    serving?: Record<string, string | number | boolean>;
  } = {},
): Promise<TargetInfo> {
  const simulated = client.simulated === true;
  let dummyWeights = false;
  let server: ServerInfo | undefined;
  const withInfo = client as ModelClient & { info?: () => Promise<InProcessModelInfo> };
  if (typeof withInfo.info === 'function') {
    try {
      const info = await withInfo.info();
      dummyWeights = info.dummyWeights === true;
      server = inProcessServer(client, info);
    } catch {
      // A model that cannot describe itself will fail its calls too; the report shows those.
    }
  }
  if (options.endpoint !== undefined) server = await describeServer(options.endpoint);
  const testServer = server?.engine === testServerOwner;
  const kinds = [
    testServer ? 'LOCAL TEST SERVER: scripted answers and injected delays, not a model' : undefined,
    dummyWeights ? "DUMMY-WEIGHT MODEL: random weights, its outputs and lengths are not a real model's" : undefined,
    simulated && !dummyWeights && !testServer ? 'SIMULATED: a simulation policy, not a model' : undefined,
  ].filter((kind): kind is string => kind !== undefined);
  const base =
    options.label ?? `${client.provider} ${client.modelId}${options.endpoint ? ` @ ${options.endpoint}` : ''}`;
  const warning = kinds.length > 0 ? kinds.join('; ') : undefined;
  return {
    label: warning ? `${base} [${warning}]` : base,
    provider: client.provider,
    modelId: client.modelId,
    ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
    simulated: simulated || dummyWeights || testServer,
    dummyWeights,
    testServer,
    ...(warning ? { warning } : {}),
    ...(options.hardware !== undefined ? { hardware: options.hardware } : {}),
    ...(options.serving !== undefined ? { serving: options.serving } : {}),
    ...(server ? { server } : {}),
  };
}

/** What an in-process backend (onnx) says about its model. */
interface InProcessModelInfo {
  dummyWeights?: boolean;
  modelType?: string;
  layers?: number;
  vocabularySize?: number;
  logitsToKeepInput?: string;
}

/** The in-process onnx backend as the "server": onnxruntime-node with the model's shape. */
function inProcessServer(client: ModelClient, info: InProcessModelInfo): ServerInfo {
  const settings: Record<string, string | number | boolean> = {};
  if (info.modelType !== undefined) settings.modelType = info.modelType;
  if (info.layers !== undefined) settings.layers = info.layers;
  if (info.vocabularySize !== undefined) settings.vocabularySize = info.vocabularySize;
  settings.logitsToKeep = info.logitsToKeepInput !== undefined;
  return {
    engine: `${client.provider} in-process (onnxruntime-node)`,
    version: onnxEnv.versions.node ?? onnxEnv.versions.common,
    models: [{ id: client.modelId }],
    specDecodeMetrics: [],
    settings,
    unreadable: [],
  };
}

/**
 * Reads what an OpenAI-compatible server tells about itself: `/v1/models` (ids, `max_model_len`
 * on vLLM and SGLang, `owned_by` naming the engine), `/version`, SGLang's `/get_server_info`
 * (speculative settings). `/metrics` is read by the replay itself around the measured phase (the
 * spec-decode names come from there). Nothing here fails the replay: what did not answer is
 * listed in `unreadable`.
 */
export async function describeServer(root: string): Promise<ServerInfo> {
  const base = root.replace(/\/+$/, '');
  const info: ServerInfo = { models: [], specDecodeMetrics: [], unreadable: [] };
  const [models, version] = await Promise.all([getJson(`${base}/v1/models`), getJson(`${base}/version`)]);
  if ('value' in models) {
    const data = ((models.value as { data?: unknown }).data ?? []) as Array<{
      id?: unknown;
      owned_by?: unknown;
      max_model_len?: unknown;
    }>;
    info.models = data
      .filter((model) => typeof model.id === 'string')
      .map((model) => ({
        id: model.id as string,
        ...(typeof model.max_model_len === 'number' ? { maxModelLen: model.max_model_len } : {}),
      }));
    const owner = data.find((model) => typeof model.owned_by === 'string')?.owned_by as string | undefined;
    if (owner !== undefined) info.engine = owner;
  } else info.unreadable.push(`/v1/models: ${models.error}`);
  if ('value' in version && typeof (version.value as { version?: unknown }).version === 'string')
    info.version = (version.value as { version: string }).version;
  else info.unreadable.push(`/version: ${'error' in version ? version.error : 'no "version" field'}`);
  if (info.engine === 'sglang') {
    const serverInfo = await getJson(`${base}/get_server_info`);
    if ('value' in serverInfo) {
      const settings = serverInfo.value as Record<string, unknown>;
      const speculative = Object.fromEntries(
        Object.entries(settings).filter(
          ([key, value]) =>
            key.startsWith('speculative_') && value !== null && ['string', 'number', 'boolean'].includes(typeof value),
        ),
      ) as Record<string, string | number | boolean>;
      if (Object.keys(speculative).length > 0) info.settings = speculative;
    } else info.unreadable.push(`/get_server_info: ${serverInfo.error}`);
  }
  return info;
}

/** GET a JSON body (3 s, 1 MB at most); any failure comes back as a reason. */
function getJson(address: string): Promise<{ value: unknown } | { error: string }> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(address);
    } catch {
      resolve({ error: 'not a URL' });
      return;
    }
    const request = (url.protocol === 'https:' ? https : http).get(url, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (piece: string) => {
        if (text.length < 1_000_000) text += piece;
      });
      response.on('end', () => {
        if (response.statusCode !== 200) {
          resolve({ error: `HTTP ${response.statusCode}` });
          return;
        }
        try {
          resolve({ value: JSON.parse(text) as unknown });
        } catch {
          resolve({ error: 'not JSON' });
        }
      });
      response.on('error', (error) => resolve({ error: error.message }));
    });
    request.setTimeout(3000, () => request.destroy(new Error('no answer within 3 s')));
    request.on('error', (error) => resolve({ error: error.message }));
  });
}
