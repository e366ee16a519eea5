import { loadApiKey } from '../../shared/models/api-key';
import { modelEndpointOf } from '../../shared/models/model-registry';
import type { SuiteItem } from './suites/eval-suite';
import { evalSuiteOf } from './suites/registry';

/**
 * Failures count (#33): an item whose request failed or timed out fails every check it carries,
 * so its instructions stay in every denominator (before, they left it and a model that failed on
 * hard prompts scored higher), and models that are not real models are named as such.
 */

/** Every check an item carries, failed strict and loose (IFEval instructions, custom rule checks): its suite's `failedChecks`. */
export function failedChecksOf(item: SuiteItem): Array<{ name: string; strict: boolean; loose: boolean }> {
  return evalSuiteOf(item.suite).failedChecks(item);
}

/** What the project's local OpenAI-compatible test server says it is in `/v1/models` (`owned_by`). */
const testServerOwner = 'hat-test-server';

/**
 * Why an OpenAI-compatible endpoint is not a real model, from its `GET /v1/models`: the local
 * test server (`owned_by: hat-test-server`: scripted answers) or `hat serve` of a random-weight
 * model (`hat_dummy_weights: true` on the served id). Undefined when it says neither, or does not
 * answer within `timeoutMs` (the eval's own items show an endpoint that is down).
 */
export async function simulatedEndpointReason(
  config: Record<string, unknown>,
  options: { environment?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string | undefined> {
  // Any HTTP adapter that lists its models says so there (the endpoint description names where).
  const endpoint = modelEndpointOf(config);
  if (endpoint?.modelsUrl === undefined) return undefined;
  try {
    const key = loadApiKey(endpoint.apiKey ?? {}, options.environment ?? process.env).authorizationHeader();
    const response = await fetch(endpoint.modelsUrl, {
      headers: { accept: 'application/json', ...(key ? { authorization: key } : {}) },
      signal: AbortSignal.timeout(options.timeoutMs ?? 3000),
    });
    if (!response.ok) return undefined;
    const body = (await response.json()) as { data?: Array<Record<string, unknown>> };
    const entries = Array.isArray(body.data) ? body.data : [];
    if (entries.some((entry) => entry.owned_by === testServerOwner))
      return 'LOCAL TEST SERVER: scripted answers, not a model';
    const served =
      entries.find((entry) => entry.id === endpoint.model) ?? (entries.length === 1 ? entries[0] : undefined);
    if (served?.hat_dummy_weights === true) return 'DUMMY-WEIGHT MODEL: hat serve of random weights';
    return undefined;
  } catch {
    return undefined;
  }
}
