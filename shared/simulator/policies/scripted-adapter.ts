import { z } from 'zod';
import { BadInputError } from '../../errors';
import type { Harness } from '../../harness/harness-types';
import { inProcessModelEndpoint } from '../../models/model-endpoint';
import type { ModelAdapterFactory, ModelClientDependencies } from '../../models/model-registry';
import type { Task } from '../tasks/task-schema';
import { ScriptedExpert } from './scripted-expert';
import { StochasticPolicy } from './stochastic-policy';

/**
 * The `scripted` model adapter: the simulator's scripted expert (`policy: expert`, the default
 * teacher) or its stochastic simulation variant (`policy: stochastic`). Both need the tasks
 * and harnesses of the episodes they play; the caller hands them over as services:
 * `scriptedExpert` (an existing ScriptedExpert to use or wrap), or `simulatorTasks` and
 * `simulatorHarnesses` (iterables) to build one.
 */
export const scriptedModelConfigSchema = z
  .object({
    adapter: z.literal('scripted'),
    /** Which policy. Default expert. */
    policy: z.enum(['expert', 'stochastic']).default('expert'),
    /** Seed of the stochastic policy's mistakes. Default "0". */
    seed: z.union([z.string(), z.number()]).default('0'),
    /** Mistake probabilities of the stochastic policy (defaults in stochastic-policy.ts). */
    errorRates: z
      .object({
        wrongTool: z.number().min(0).max(1),
        wrongArgument: z.number().min(0).max(1),
        malformedJson: z.number().min(0).max(1),
        hallucinatedNumber: z.number().min(0).max(1),
        bannedWord: z.number().min(0).max(1),
        overlongReply: z.number().min(0).max(1),
      })
      .partial()
      .strict()
      .optional(),
  })
  .strict();
export type ScriptedModelConfig = z.infer<typeof scriptedModelConfigSchema>;

export const scriptedServiceKeys = {
  expert: 'scriptedExpert',
  tasks: 'simulatorTasks',
  harnesses: 'simulatorHarnesses',
} as const;

function expertFrom(dependencies: ModelClientDependencies): ScriptedExpert {
  const services = dependencies.services ?? {};
  const given = services[scriptedServiceKeys.expert];
  if (given instanceof ScriptedExpert) return given;
  const tasks = services[scriptedServiceKeys.tasks] as Iterable<Task> | undefined;
  const harnesses = services[scriptedServiceKeys.harnesses] as Iterable<Harness> | undefined;
  if (tasks === undefined || harnesses === undefined) {
    throw new BadInputError(
      'SCRIPTED_POLICY_UNBOUND',
      `${dependencies.configPath ?? 'model'}: the scripted adapter plays simulator tasks only; the stage running it must pass services.${scriptedServiceKeys.tasks} and services.${scriptedServiceKeys.harnesses} (or services.${scriptedServiceKeys.expert})`,
    );
  }
  return new ScriptedExpert({ tasks, harnesses });
}

export const scriptedAdapter: ModelAdapterFactory<ScriptedModelConfig> = {
  chat: {
    configSchema: scriptedModelConfigSchema,
    create: (config, dependencies) => {
      const expert = expertFrom(dependencies);
      return config.policy === 'expert'
        ? expert
        : new StochasticPolicy({ seed: config.seed, errorRates: config.errorRates, expert });
    },
  },
  endpoint: (config) =>
    inProcessModelEndpoint('scripted', {
      ...(typeof config.policy === 'string' ? { source: config.policy } : {}),
      simulated: true,
    }),
};
