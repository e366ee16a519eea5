import { loadEnv, type HatEnv } from '../shared/config/env';
import { redactUrlCredentials } from '../shared/config/url-credentials';
import { createLogger, type Logger } from '../shared/log/logger';

/** What every command gets: env parsed once on first use, a logger, and output streams. */
export class CliContext {
  private cachedEnv?: HatEnv;
  private cachedLogger?: Logger;

  constructor(
    readonly stdout: NodeJS.WritableStream = process.stdout,
    readonly stderr: NodeJS.WritableStream = process.stderr,
    /** The variables the command sees (API keys named by configs are read from here). */
    readonly environment: NodeJS.ProcessEnv = process.env,
  ) {}

  get env(): HatEnv {
    this.cachedEnv ??= loadEnv(this.environment);
    return this.cachedEnv;
  }

  get logger(): Logger {
    this.cachedLogger ??= createLogger({ level: this.env.HAT_LOG_LEVEL });
    return this.cachedLogger;
  }

  /**
   * A line of command output, URL secrets redacted: a record written before they were refused (a
   * promotion pointer, a run status) must not show them. Artifact bytes (`hat artifacts cat`) go
   * to `stdout` as they are.
   */
  print(line = ''): void {
    this.stdout.write(`${redactUrlCredentials(line)}\n`);
  }

  /** A JSON document on stdout, URL secrets redacted (the redaction keeps the JSON well formed). */
  printJson(value: unknown): void {
    this.stdout.write(`${redactUrlCredentials(JSON.stringify(value, null, 2))}\n`);
  }
}
