import type { Harness } from '../../shared/harness/harness-types';
import type { Logger } from '../../shared/log/logger';
import type { ChatRequest, ChatResponse, ModelClient, SamplingSettings } from '../../shared/models/model-client';
import { createModelClient } from '../../shared/models/model-registry';
import { scriptedServiceKeys } from '../../shared/simulator/policies/scripted-adapter';
import { ScriptedExpert } from '../../shared/simulator/policies/scripted-expert';
import type { Task } from '../../shared/simulator/tasks/task-schema';

/**
 * The teacher of a collect part: whatever adapter the config names, built through the model
 * registry. The scripted adapter plays only tasks and harnesses it was given, so it gets an
 * expert that knows this part's tasks; other adapters ignore it. The config names where an
 * API key comes from (apiKeyEnv/apiKeyFile); the key is read here, in the process that calls
 * the server, and never enters job data, artifacts or logs.
 */
export function openTeacher(
  config: unknown,
  options: { harness: Harness; tasks: Iterable<Task>; logger?: Logger; random?: () => number },
): ModelClient {
  const expert = new ScriptedExpert({ tasks: options.tasks, harnesses: [options.harness] });
  return createModelClient(config, {
    configPath: 'collect.teacher',
    logger: options.logger,
    random: options.random,
    services: { [scriptedServiceKeys.expert]: expert },
  });
}

/**
 * The teacher as one episode sees it: every call goes to the shared client, and the error that
 * ended the episode is kept. The agent loop records a failed call as status model_error with
 * the message only; the part needs the error itself (its code, whether it is retryable, the
 * server's Retry-After) to tell a down server from a bad request.
 */
export class EpisodeTeacher implements ModelClient {
  readonly specificationVersion = 'v1' as const;
  /** The error of the call that failed, if one did. */
  failure: unknown;

  constructor(private readonly client: ModelClient) {}

  get provider(): string {
    return this.client.provider;
  }

  get modelId(): string {
    return this.client.modelId;
  }

  get sampling(): SamplingSettings | undefined {
    return this.client.sampling;
  }

  get simulated(): boolean | undefined {
    return this.client.simulated;
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    try {
      return await this.client.chat(request);
    } catch (error) {
      this.failure = error;
      throw error;
    }
  }
}
