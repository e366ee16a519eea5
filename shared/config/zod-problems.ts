import type { ZodError } from 'zod';
import type { Problem } from '../errors';

/** Turns every zod issue into a Problem with its dot-path, for one-pass reporting. */
export function zodProblems(error: ZodError, file?: string, pathPrefix = ''): Problem[] {
  return error.issues.map((issue) => {
    const path = issue.path
      .map((segment) => (typeof segment === 'number' ? `[${segment}]` : `.${String(segment)}`))
      .join('');
    const fullPath = `${pathPrefix}${path}`.replace(/^\./, '');
    return { file, path: fullPath || '(root)', message: issue.message };
  });
}
