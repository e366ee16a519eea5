import pino, { type Logger } from 'pino';
import { redactUrlCredentials } from '../config/url-credentials';

export type { Logger };

/** Field names that hold secrets: their values never reach a log line. */
export const secretFieldNames = [
  'apiKey',
  'api_key',
  'authorization',
  'Authorization',
  'password',
  'secretAccessKey',
  'sessionToken',
  'token',
  'accessToken',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'HAT_DASHBOARD_TOKEN',
];

/** How deep a secret field is searched: `config.stages.collect.teacher.apiKey` is four levels down. */
const redactionDepth = 5;

/**
 * Every secret field at the top and up to `redactionDepth` levels down (pino's redaction takes
 * explicit paths, compiled once, rather than walking each line).
 */
export const redactedPaths = secretFieldNames.flatMap((name) =>
  Array.from({ length: redactionDepth + 1 }, (_, depth) => `${'*.'.repeat(depth)}${name}`),
);

/**
 * Structured JSON logs (pino). Bindings carry run, stage, part and job ids; secrets are redacted.
 * Writes to stderr so command output on stdout stays machine-readable.
 */
export function createLogger(
  options: { level?: string; bindings?: Record<string, unknown>; destination?: pino.DestinationStream } = {},
): Logger {
  const logger = pino(
    {
      level: options.level ?? process.env.HAT_LOG_LEVEL ?? 'info',
      redact: { paths: redactedPaths, censor: '[redacted]' },
      // Field redaction cannot see a URL's userinfo inside a message or an error text.
      hooks: { streamWrite: redactUrlCredentials },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ fd: 2, sync: false }),
  );
  return options.bindings ? logger.child(options.bindings) : logger;
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
