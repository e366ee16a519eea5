import { access, constants } from 'node:fs/promises';
import { dirname } from 'node:path';
import { HatError, TransientError } from '../errors';

/**
 * File-system faults of a `file://` store, named by their real cause. Each is retryable: a full
 * disk gets space, a read-only remount is undone, a lost volume comes back; the stage's retries
 * (and the store's own retry budget, HAT_STORAGE_RETRY_MS) wait for the operator.
 */
const causes: Record<string, { code: string; what: string; fix: string }> = {
  EROFS: {
    code: 'STORAGE_READ_ONLY',
    what: 'the file system is read-only (EROFS)',
    fix: 'remount it read-write or point the artifact root elsewhere',
  },
  ENOSPC: { code: 'STORAGE_FULL', what: 'no space left on the device (ENOSPC)', fix: 'free space or grow the volume' },
  EDQUOT: { code: 'STORAGE_FULL', what: 'the disk quota is exceeded (EDQUOT)', fix: 'raise the quota or free space' },
  EACCES: {
    code: 'STORAGE_ACCESS_DENIED',
    what: 'permission denied (EACCES)',
    fix: "give the worker's user write access to the artifact root",
  },
  EPERM: {
    code: 'STORAGE_ACCESS_DENIED',
    what: 'operation not permitted (EPERM)',
    fix: "give the worker's user write access to the artifact root",
  },
  EIO: { code: 'STORAGE_IO_ERROR', what: 'an I/O error from the device (EIO)', fix: 'check the volume' },
  ENOTCONN: { code: 'STORAGE_UNAVAILABLE', what: 'the volume is not connected (ENOTCONN)', fix: 'check the mount' },
  ESTALE: { code: 'STORAGE_UNAVAILABLE', what: 'a stale network file handle (ESTALE)', fix: 'check the mount' },
};

/** Codes of storage faults that are worth waiting out (file stores and S3). */
export const storageFaultCodes = new Set(['S3_UNAVAILABLE', ...Object.values(causes).map((cause) => cause.code)]);

/** Whether an error is a storage fault worth retrying (see `storageFaultCodes`). */
export function isStorageFault(error: unknown): boolean {
  return HatError.isInstance(error) && error.retryable && storageFaultCodes.has(error.code);
}

function codeOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null
    ? ((error as { code?: unknown }).code as string | undefined)
    : undefined;
}

/** A HatError naming the cause of a file-system error, or undefined when it is not a storage fault. */
export function fileStorageError(error: unknown, operation: string, uri: string): HatError | undefined {
  const cause = causes[codeOf(error) ?? ''];
  if (!cause) return undefined;
  return new TransientError(cause.code, `${operation} ${uri}: ${cause.what}; ${cause.fix}`, {
    cause: error,
    details: { operation, uri },
  });
}

/**
 * A recursive mkdir on a read-only or unwritable file system can report ENOENT (libuv creates
 * parents one by one and returns the first error it met); the nearest directory that exists says
 * what is really wrong.
 */
export async function diagnoseMissingDirectory(
  path: string,
  operation: string,
  uri: string,
  original: unknown,
): Promise<HatError> {
  let directory = path;
  for (;;) {
    const parent = dirname(directory);
    const exists = await access(directory).then(
      () => true,
      () => false,
    );
    if (exists) {
      const writable = await access(directory, constants.W_OK).then(
        () => undefined,
        (error: unknown) => error,
      );
      const named = writable === undefined ? undefined : fileStorageError(writable, operation, uri);
      if (named) return named;
      break;
    }
    if (parent === directory) break;
    directory = parent;
  }
  return new TransientError(
    'STORAGE_UNAVAILABLE',
    `${operation} ${uri}: cannot create ${dirname(path)} (${(original as Error).message}); is the volume mounted?`,
    {
      cause: original,
      details: { operation, uri },
    },
  );
}
