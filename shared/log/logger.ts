import pino, { type Logger } from 'pino';

export type { Logger };

/** Keys whose values never reach a log line, wherever they are nested. */
export const redactedPaths = [
  'apiKey', '*.apiKey', '*.*.apiKey', 'authorization', '*.authorization', '*.*.authorization',
  'headers.authorization', '*.headers.authorization', 'password', '*.password', 'secretAccessKey',
  '*.secretAccessKey', '*.*.secretAccessKey', 'token', '*.token', 'AWS_SECRET_ACCESS_KEY',
];

/**
 * Structured JSON logs (pino). Bindings carry run, stage, part and job ids; secrets are redacted.
 * Writes to stderr so command output on stdout stays machine-readable.
 */
export function createLogger(options: { level?: string; bindings?: Record<string, unknown>; destination?: pino.DestinationStream } = {}): Logger {
  const logger = pino(
    {
      level: options.level ?? process.env.HAT_LOG_LEVEL ?? 'info',
      redact: { paths: redactedPaths, censor: '[redacted]' },
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
