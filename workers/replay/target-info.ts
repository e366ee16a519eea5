import http from 'node:http';
import https from 'node:https';
import { z } from 'zod';
import type { ModelClient } from '../../shared/models/model-client';

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
});
export type TargetInfo = z.infer<typeof targetInfoSchema>;

/** What the test server's `/v1/models` says it is (`owned_by`). */
const testServerOwner = 'hat-test-server';

/**
 * Describes the target: the client's own `simulated` flag, `dummyWeights` from clients that can
 * report their model (`info()`, e.g. onnx), and for HTTP targets whether `/v1/models` is the local
 * test server's. `label` overrides the headline, never the warning.
 */
export async function describeTarget(client: ModelClient, options: { endpoint?: string; label?: string } = {}): Promise<TargetInfo> {
  const simulated = client.simulated === true;
  let dummyWeights = false;
  const withInfo = client as ModelClient & { info?: () => Promise<{ dummyWeights?: boolean }> };
  if (typeof withInfo.info === 'function') {
    try {
      dummyWeights = (await withInfo.info()).dummyWeights === true;
    } catch {
      // A model that cannot describe itself will fail its calls too; the report shows those.
    }
  }
  const testServer = options.endpoint !== undefined && (await servedByTestServer(options.endpoint));
  const kinds = [
    testServer ? 'LOCAL TEST SERVER: scripted answers and injected delays, not a model' : undefined,
    dummyWeights ? 'DUMMY-WEIGHT MODEL: random weights, its outputs and lengths are not a real model\'s' : undefined,
    simulated && !dummyWeights && !testServer ? 'SIMULATED: a simulation policy, not a model' : undefined,
  ].filter((kind): kind is string => kind !== undefined);
  const base = options.label ?? `${client.provider} ${client.modelId}${options.endpoint ? ` @ ${options.endpoint}` : ''}`;
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
  };
}

/** Whether `<root>/v1/models` lists a model owned by the test server (any failure: no). */
function servedByTestServer(root: string): Promise<boolean> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(`${root.replace(/\/+$/, '')}/v1/models`);
    } catch {
      resolve(false);
      return;
    }
    const request = (url.protocol === 'https:' ? https : http).get(url, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (piece: string) => {
        if (text.length < 1_000_000) text += piece;
      });
      response.on('end', () => {
        try {
          const body = JSON.parse(text) as { data?: Array<{ owned_by?: unknown }> };
          resolve(response.statusCode === 200 && (body.data ?? []).some((model) => model.owned_by === testServerOwner));
        } catch {
          resolve(false);
        }
      });
      response.on('error', () => resolve(false));
    });
    request.setTimeout(3000, () => request.destroy());
    request.on('error', () => resolve(false));
  });
}
