import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { redactUrlCredentials, refuseUrlCredentials } from '../config/url-credentials';
import { BadInputError } from '../errors';

/** An artifact location split into its parts. */
export type ArtifactLocation =
  | {
      scheme: 's3';
      bucket: string;
      /** Key or key prefix inside the bucket, without a leading "/" ("" for the bucket root). */
      key: string;
    }
  | {
      scheme: 'file';
      /** Absolute local path. */
      path: string;
    };

const bucketName = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

function badUri(uri: string, reason: string): never {
  throw new BadInputError(
    'BAD_ARTIFACT_URI',
    `artifact URI ${JSON.stringify(redactUrlCredentials(uri))} ${reason}; use s3://bucket/prefix or file:///absolute/path`,
  );
}

/** Parses `s3://bucket/key` or `file:///abs/path`; throws BadInputError `BAD_ARTIFACT_URI` otherwise. */
export function parseArtifactUri(uri: string): ArtifactLocation {
  // Credentials would travel into Redis job data, logs and reports.
  refuseUrlCredentials(uri, 'artifact URI');
  if (uri.startsWith('s3://')) {
    const rest = uri.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash === -1 ? rest : rest.slice(0, slash);
    const key = slash === -1 ? '' : rest.slice(slash + 1);
    if (!bucketName.test(bucket)) badUri(uri, `has an invalid bucket name ${JSON.stringify(bucket)}`);
    return { scheme: 's3', bucket, key };
  }
  if (uri.startsWith('file:')) return { scheme: 'file', path: fileUriToPath(uri) };
  return badUri(uri, 'has an unsupported scheme');
}

/**
 * The local path of a `file:` URI; BadInputError `BAD_ARTIFACT_URI` for anything else. The usual
 * slip, `file://tmp/x` (two slashes: "tmp" is read as a host name), gets the three-slash form.
 */
export function fileUriToPath(uri: string): string {
  // Credentials would travel into Redis job data, logs and reports.
  refuseUrlCredentials(uri, 'artifact URI');
  const host = /^file:\/\/([^/]*)/.exec(uri)?.[1];
  if (host !== undefined && host !== '' && host !== 'localhost') {
    const suggested = redactUrlCredentials(`file:///${uri.slice('file://'.length)}`);
    throw new BadInputError(
      'BAD_ARTIFACT_URI',
      `artifact URI ${JSON.stringify(redactUrlCredentials(uri))} names the host ${JSON.stringify(host)} (two slashes after "file:"); a local path takes three: ${suggested} (use s3://bucket/prefix or file:///absolute/path)`,
    );
  }
  let path: string;
  try {
    path = fileURLToPath(uri);
  } catch (error) {
    badUri(uri, `is not a valid file URL (${(error as Error).message})`);
  }
  if (!isAbsolute(path)) badUri(uri, 'is not an absolute path');
  return path;
}

/** A local path becomes a file URI; URIs stay as they are. */
export function asArtifactUri(target: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(target) ? target : pathToFileURL(resolve(target)).href;
}
