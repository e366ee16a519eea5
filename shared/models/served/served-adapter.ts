import { z } from 'zod';
import { tokenizerSourceSchema } from '../../text/tokenizer-source-config';
import { httpModelEndpoint } from '../model-endpoint';
import type { ModelAdapterFactory } from '../model-registry';
import { RemoteTokenScorer, type ScoringApi } from '../scoring/remote-token-scorer';
import { remoteScorerConfigSchema } from '../scoring/scoring-endpoint';
import {
  logprobsModeCheck,
  servedSamplerFieldsSchema,
  ServedTokenSampler,
  type TokenSamplingApi,
} from '../token-exact/served-token-sampler';

/** A tokenizer fingerprint as distill manifests record it. */
const sha256Hex = z
  .string()
  .regex(
    /^[0-9a-f]{64}$/,
    'must be a lowercase hex sha256 (as recorded in a distill manifest under tokenizer.fingerprint)',
  );

/** The sampler config of a served adapter: the served-sampler fields under its `adapter` literal. */
function samplerSchema<Name extends string>(name: Name, api: TokenSamplingApi) {
  return servedSamplerFieldsSchema
    .extend({ adapter: z.literal(name) })
    .strict()
    .superRefine(logprobsModeCheck(api));
}

/**
 * The scorer config of a served adapter (distill's teacher). Its tokenizer is checked against the
 * student's through the scoring endpoint (a probe of token ids whose texts must match), and
 * against `tokenizer`/`tokenizerFingerprint` when given.
 */
function scorerSchema<Name extends string>(name: Name) {
  return remoteScorerConfigSchema
    .extend({
      adapter: z.literal(name),
      /** A local copy of the teacher's tokenizer: its fingerprint must equal the student's. */
      tokenizer: tokenizerSourceSchema.optional(),
      /** The teacher tokenizer's fingerprint (as distill manifests record it): must equal the student's. */
      tokenizerFingerprint: sha256Hex.optional(),
    })
    .strict();
}

export type ServedSamplerAdapterConfig = z.infer<ReturnType<typeof samplerSchema>>;
export type ServedScorerAdapterConfig = z.infer<ReturnType<typeof scorerSchema>>;

/**
 * A registry entry for an inference server sampled and scored by token ids through its own API
 * (`vllm`, `sglang`): token-exact sampling over `sampling`, scoring over `scoring`, described as
 * that server with its model list and metrics at its root. Chat goes through `adapter: openai`
 * (the same server's OpenAI-compatible API).
 */
export function servedModelAdapter<Name extends 'vllm' | 'sglang'>(
  name: Name,
  apis: { sampling: TokenSamplingApi; scoring: ScoringApi },
): ModelAdapterFactory<never, ServedSamplerAdapterConfig, ServedScorerAdapterConfig> {
  return {
    tokenSampler: {
      configSchema: samplerSchema(name, apis.sampling),
      create: (config, dependencies) => new ServedTokenSampler(apis.sampling, config, dependencies),
    },
    tokenScorer: {
      configSchema: scorerSchema(name),
      create: (config, dependencies) => new RemoteTokenScorer(apis.scoring, config, dependencies),
    },
    endpoint: (config) => httpModelEndpoint(name, config, { kind: name }),
  };
}
