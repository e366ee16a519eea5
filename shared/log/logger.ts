import pino, { type Logger } from 'pino';
import { redactUrlCredentials } from '../config/url-credentials';
import { safeLogFields } from './log-fields';

export type { Logger };

/** The finished line with URL secrets redacted; a line that cannot be read is written as it is. */
function redactLine(line: string): string {
  try {
    return redactUrlCredentials(line);
  } catch {
    return line;
  }
}

/**
 * Structured JSON logs (pino). Bindings carry run, stage, part and job ids; secrets are redacted.
 * Writes to stderr so command output on stdout stays machine-readable. Logging never throws,
 * whatever a line's fields hold (see `safeLogFields`).
 */
export function createLogger(
  options: { level?: string; bindings?: Record<string, unknown>; destination?: pino.DestinationStream } = {},
): Logger {
  const logger = pino(
    {
      level: options.level ?? process.env.HAT_LOG_LEVEL ?? 'info',
      formatters: { log: safeLogFields, bindings: safeLogFields },
      // safeLogFields has already given errors pino's shape.
      serializers: { err: (value: unknown) => value },
      // Field redaction cannot see a URL's secret inside a message.
      hooks: { streamWrite: redactLine },
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
