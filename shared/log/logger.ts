import pino, { type LogFn, type Logger } from 'pino';
import { redactUrlCredentials } from '../config/url-credentials';
import { bounded, logText, safeLogFields, unreadable } from './log-fields';

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
 * The arguments of a log call as pino reads them without surprises: a first argument that is
 * neither an object nor a string (a Symbol, a BigInt) becomes the message text (pino would write
 * it as invalid JSON), and a message string is bounded.
 */
function plainArguments(args: unknown[]): unknown[] {
  const [first, ...rest] = args;
  if (typeof first === 'string') return [bounded(first), ...rest];
  if (first !== null && first !== undefined && typeof first !== 'object') return [logText(first), ...rest];
  if (typeof rest[0] === 'string') return [first, bounded(rest[0]), ...rest.slice(1)];
  return args;
}

/**
 * The arguments of a log call that pino could not write (a format argument whose toString throws,
 * a Proxy, an error whose message getter throws), made of what can be read: the fields copied by
 * `safeLogFields`, the message and its format arguments joined as text, and why.
 */
function readableArguments(args: unknown[], error: unknown): [Record<string, unknown>, string] {
  const [first, ...rest] = args;
  const fieldsGiven = first !== null && typeof first === 'object';
  const fields = fieldsGiven ? safeLogFields(isError(first) ? { err: first } : (first as Record<string, unknown>)) : {};
  const message = (fieldsGiven ? rest : args).map(logText).join(' ');
  return [{ ...fields, logCallFailed: unreadable(error) }, message];
}

/** `instanceof Error`, false for an object that throws when asked (a Proxy). */
function isError(value: unknown): boolean {
  try {
    return value instanceof Error;
  } catch {
    return false;
  }
}

/**
 * pino's `logMethod` hook: every call goes through it. A call pino cannot write is written again
 * from what can be read; if even that fails the line is lost, but the caller never sees an error.
 */
function logSafely(this: Logger, args: Parameters<LogFn>, method: LogFn): void {
  try {
    method.apply(this, plainArguments(args) as Parameters<LogFn>);
  } catch (error) {
    try {
      method.apply(this, readableArguments(args, error));
    } catch {
      // Nothing left to write: a logger must not turn what it reports into a crash.
    }
  }
}

/**
 * Structured JSON logs (pino). Bindings carry run, stage, part and job ids; secrets are redacted.
 * Writes to stderr so command output on stdout stays machine-readable. Logging never throws,
 * whatever a call's fields, message or format arguments hold (see `safeLogFields`, `logSafely`).
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
      hooks: {
        logMethod: logSafely,
        // Field redaction cannot see a URL's secret inside a message.
        streamWrite: redactLine,
      },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ fd: 2, sync: false }),
  );
  // pino writes a child's bindings without the bindings formatter (it applies only to `base`):
  // they are copied here, for every descendant (children inherit this method).
  const ownChild = logger.child;
  logger.child = function safeChild(this: Logger, bindings, childOptions) {
    return ownChild.call(this, safeLogFields(bindings), childOptions);
  } as Logger['child'];
  return options.bindings ? logger.child(options.bindings) : logger;
}

/** A logger that drops everything (tests, benchmarks). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
