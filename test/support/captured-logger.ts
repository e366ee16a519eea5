import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../shared/log/logger';

/** A real pino logger (redaction included) whose JSON lines go to `append` instead of stderr. */
export function loggerInto(append: (text: string) => void, level?: string): Logger {
  return createLogger({
    ...(level ? { level } : {}),
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    }),
  });
}
