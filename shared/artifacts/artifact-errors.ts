import { BadInputError } from '../errors';

/** The one error for a missing object, whichever store it came from. */
export function artifactNotFound(uri: string, cause?: unknown): BadInputError {
  return new BadInputError(
    'ARTIFACT_NOT_FOUND',
    `${uri} does not exist; check the URI (\`hat artifacts ls <prefix>\` shows what is there)`,
    {
      cause,
      details: { uri },
    },
  );
}
