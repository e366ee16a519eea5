import { readFileSync } from 'node:fs';
import { BadInputError } from '../errors';
import { modelErrorCodes } from './model-errors';

/** Where a model client's key comes from: names only, so configs stay safe to serialize. */
export interface ApiKeySource {
  /** Environment variable holding the key. */
  apiKeyEnv?: string;
  /** File holding the key (surrounding whitespace is trimmed), e.g. a mounted Kubernetes secret. */
  apiKeyFile?: string;
}

/**
 * An API key kept out of everything that gets serialized or logged: the value lives in a private
 * field, `toJSON`/`toString`/inspection show `[redacted]`, and `redact` scrubs it from text a
 * server sends back (some servers echo the key they rejected).
 */
export class ApiKey {
  readonly #value: string | undefined;

  constructor(value: string | undefined) {
    this.#value = value === undefined || value === '' ? undefined : value;
  }

  get present(): boolean {
    return this.#value !== undefined;
  }

  /** The `Authorization` header value, or undefined for servers without auth. */
  authorizationHeader(): string | undefined {
    return this.#value === undefined ? undefined : `Bearer ${this.#value}`;
  }

  redact(text: string): string {
    return this.#value === undefined || !text.includes(this.#value) ? text : text.split(this.#value).join('[redacted]');
  }

  toJSON(): string {
    return this.present ? '[redacted]' : '[none]';
  }

  toString(): string {
    return this.toJSON();
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ApiKey(${this.toJSON()})`;
  }
}

/**
 * Reads the key named by the config. A file beats the environment variable when both are given
 * (an explicit mounted secret is the more specific setting). A named source that is missing or
 * empty is bad config, reported with the field to fix.
 */
export function loadApiKey(
  source: ApiKeySource,
  environment: NodeJS.ProcessEnv = process.env,
  configPath = 'model',
): ApiKey {
  if (source.apiKeyFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(source.apiKeyFile, 'utf8');
    } catch (error) {
      throw new BadInputError(
        modelErrorCodes.apiKeyMissing,
        `${configPath}.apiKeyFile: cannot read ${source.apiKeyFile} (${(error as NodeJS.ErrnoException).code ?? String(error)}); mount the key file there or remove apiKeyFile`,
      );
    }
    const value = text.trim();
    if (!value)
      throw new BadInputError(
        modelErrorCodes.apiKeyMissing,
        `${configPath}.apiKeyFile: ${source.apiKeyFile} is empty; write the API key into it`,
      );
    return new ApiKey(value);
  }
  if (source.apiKeyEnv !== undefined) {
    const value = environment[source.apiKeyEnv]?.trim();
    if (!value) {
      throw new BadInputError(
        modelErrorCodes.apiKeyMissing,
        `${configPath}.apiKeyEnv names the environment variable ${source.apiKeyEnv}, which is not set; export ${source.apiKeyEnv}=<key> or set ${configPath}.apiKeyFile`,
      );
    }
    return new ApiKey(value);
  }
  return new ApiKey(undefined);
}
