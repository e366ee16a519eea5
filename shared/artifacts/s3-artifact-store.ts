import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BadInputError, HatError, TransientError, isRetryable } from '../errors';
import { sha256Hex } from '../hash/hash';
import { artifactNotFound } from './artifact-errors';
import type { ArtifactStore, ObjectInfo, PutOptions } from './artifact-store';
import { parseArtifactUri } from './artifact-uri';
import { ByteMeter } from './byte-meter';
import { validateKeyPrefix, validateObjectKey } from './object-key';

/** How to reach S3 or an S3-compatible server. */
export interface S3Settings {
  /** Endpoint of an S3-compatible server (MinIO, s3rver, Ceph); unset for AWS. */
  endpoint?: string;
  /** Default us-east-1. */
  region?: string;
  /** Path-style addressing. Default: true when `endpoint` is set, else false. */
  forcePathStyle?: boolean;
  /** Explicit credentials; when unset the SDK's default chain (env, profile, instance role) applies. */
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  /** Attempts per request, retries included (the SDK retries 5xx, throttling and connection errors). Default 3. */
  maxAttempts?: number;
}

export interface S3ArtifactStoreOptions {
  bucket: string;
  /** Key prefix inside the bucket, without leading or trailing "/" ("" for the bucket root). */
  prefix?: string;
  settings?: S3Settings;
  /** Multipart part size for streamed puts. Default 8 MiB; S3 needs at least 5 MiB. */
  partSizeBytes?: number;
  /** Parts uploaded at once; memory is about partSizeBytes × queueSize. Default 4. */
  queueSize?: number;
}

const minimumPartSize = 5 * 1024 * 1024;
const throttlingNames = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'RequestTimeout',
  'RequestTimeTooSkewed',
  'TimeoutError',
  'InternalError',
  'ServiceUnavailable',
]);
/** Connection-level failures, matched by message too: the SDK may wrap them and drop their `code`. */
const networkFailure =
  /\b(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EAI_AGAIN|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|socket hang up)\b/;
const accessNames = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'CredentialsProviderError',
]);

/** Builds an S3 client; non-AWS endpoints get path-style URLs and checksums only where required. */
export function createS3Client(settings: S3Settings = {}): S3Client {
  const config: S3ClientConfig = {
    region: settings.region ?? 'us-east-1',
    maxAttempts: settings.maxAttempts ?? 3,
    requestHandler: { connectionTimeout: 10_000 },
  };
  if (settings.endpoint) {
    config.endpoint = settings.endpoint;
    // S3-compatible servers reject or mis-store the SDK's default CRC32 trailers (s3rver keeps the
    // aws-chunked framing of a streamed put as the object's bytes), so only send checksums S3 requires.
    config.requestChecksumCalculation = 'WHEN_REQUIRED';
    config.responseChecksumValidation = 'WHEN_REQUIRED';
  }
  config.forcePathStyle = settings.forcePathStyle ?? settings.endpoint !== undefined;
  if (settings.accessKeyId && settings.secretAccessKey) {
    config.credentials = {
      accessKeyId: settings.accessKeyId,
      secretAccessKey: settings.secretAccessKey,
      sessionToken: settings.sessionToken,
    };
  }
  // The SDK version is pinned in package-lock.json; its notice that *later* versions will need
  // Node 22 would otherwise print into every worker's log on Node 20. A user's own setting wins.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  return new S3Client(config);
}

/** The fields of SDK errors this module reads. */
interface SdkErrorShape {
  name?: string;
  message?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number; attempts?: number };
  $retryable?: unknown;
}

/**
 * The one place S3 errors become project errors: missing objects name the URI, bad buckets and
 * credentials are bad input, and what the SDK retried without success is transient.
 */
export function toArtifactStoreError(error: unknown, operation: string, uri: string): unknown {
  // Duck-typed on purpose: errors from another realm (a test sandbox, a worker) fail `instanceof Error`.
  if (HatError.isInstance(error) || typeof error !== 'object' || error === null) return error;
  const sdkError = error as SdkErrorShape & { code?: unknown };
  const name = sdkError.name ?? sdkError.Code ?? '';
  const message = sdkError.message ?? '';
  const status = sdkError.$metadata?.httpStatusCode;
  const attempts = sdkError.$metadata?.attempts;
  const details = { operation, uri, s3Error: name, httpStatus: status, attempts };
  const describe = () => `${name && name !== 'Error' ? `${name}: ` : ''}${message}`.trimEnd();
  if (name === 'NoSuchKey' || name === 'NotFound') return artifactNotFound(uri, error);
  if (name === 'NoSuchBucket') {
    return new BadInputError(
      'NO_SUCH_BUCKET',
      `${operation} ${uri}: the bucket does not exist; create it or fix HAT_ARTIFACTS / S3_ENDPOINT`,
      { cause: error, details },
    );
  }
  if (accessNames.has(name) || status === 401 || status === 403) {
    return new BadInputError(
      'S3_ACCESS_DENIED',
      `${operation} ${uri}: access denied (${name || status}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket policy`,
      { cause: error, details },
    );
  }
  const transient =
    (status !== undefined && (status >= 500 || status === 429)) ||
    throttlingNames.has(name) ||
    sdkError.$retryable !== undefined ||
    isRetryable(error) ||
    networkFailure.test(message);
  if (transient) {
    const tries = attempts !== undefined ? ` after ${attempts} attempt${attempts === 1 ? '' : 's'}` : '';
    return new TransientError('S3_UNAVAILABLE', `${operation} ${uri} failed${tries}: ${describe()}`, {
      cause: error,
      details,
    });
  }
  return new HatError('S3_ERROR', `${operation} ${uri} failed: ${describe()}`, { cause: error, details });
}

/**
 * Artifacts in S3 or an S3-compatible server (`s3://bucket/prefix`). Buffers go up with one
 * PutObject; streams through multipart upload, which publishes the key only on completion and
 * aborts the upload when the stream fails, so a partial object is never visible.
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly rootUri: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly client: S3Client;
  private readonly partSizeBytes: number;
  private readonly queueSize: number;

  constructor(options: S3ArtifactStoreOptions & { client?: S3Client }) {
    this.bucket = options.bucket;
    this.prefix = options.prefix ? validateObjectKey(options.prefix) : '';
    this.rootUri = `s3://${this.bucket}${this.prefix ? `/${this.prefix}` : ''}`;
    this.client = options.client ?? createS3Client(options.settings);
    this.partSizeBytes = Math.max(options.partSizeBytes ?? 8 * 1024 * 1024, minimumPartSize);
    this.queueSize = options.queueSize ?? 4;
  }

  uriOf(key: string): string {
    return `s3://${this.bucket}/${this.objectKeyOf(key)}`;
  }

  keyOf(uri: string): string {
    const location = parseArtifactUri(uri);
    const rootKey = this.prefix ? `${this.prefix}/` : '';
    if (
      location.scheme !== 's3' ||
      location.bucket !== this.bucket ||
      !location.key.startsWith(rootKey) ||
      location.key === rootKey
    ) {
      throw new BadInputError('URI_OUTSIDE_STORE', `${uri} is not an object under ${this.rootUri}`);
    }
    return validateObjectKey(location.key.slice(rootKey.length));
  }

  async put(key: string, body: string | Uint8Array | Readable, options: PutOptions = {}): Promise<ObjectInfo> {
    const objectKey = this.objectKeyOf(key);
    const uri = this.uriOf(key);
    if (typeof body === 'string' || ArrayBuffer.isView(body)) {
      const data = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      try {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: objectKey,
            Body: data,
            ContentLength: data.byteLength,
            ContentType: options.contentType,
          }),
        );
      } catch (error) {
        throw toArtifactStoreError(error, 'put', uri);
      }
      return { key, uri, bytes: data.byteLength, sha256: sha256Hex(data) };
    }
    const meter = new ByteMeter();
    const reading = pipeline(body, meter);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: objectKey, Body: meter, ContentType: options.contentType },
      partSize: this.partSizeBytes,
      queueSize: this.queueSize,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (error) {
      // Stop the source too, so a failed upload does not leave the producer blocked forever.
      meter.destroy();
      const sourceError = await reading.then(
        () => undefined,
        (readError: unknown) => readError,
      );
      const original = sourceError !== undefined && !isPrematureClose(sourceError) ? sourceError : error;
      throw toArtifactStoreError(original, 'put', uri);
    }
    await reading;
    return { key, uri, bytes: meter.bytes, sha256: meter.sha256() };
  }

  async getStream(key: string): Promise<Readable> {
    const uri = this.uriOf(key);
    try {
      const response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKeyOf(key) }),
      );
      if (!(response.Body instanceof Readable))
        throw new HatError('S3_ERROR', `get ${uri}: the response has no readable body`);
      return response.Body;
    } catch (error) {
      throw toArtifactStoreError(error, 'get', uri);
    }
  }

  async getBuffer(key: string): Promise<Buffer> {
    const uri = this.uriOf(key);
    try {
      const response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKeyOf(key) }),
      );
      if (!response.Body) throw new HatError('S3_ERROR', `get ${uri}: the response has no body`);
      return Buffer.from(await response.Body.transformToByteArray());
    } catch (error) {
      throw toArtifactStoreError(error, 'get', uri);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const uri = this.uriOf(key);
    try {
      const response = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: this.objectKeyOf(key) }),
      );
      return { key, uri, bytes: response.ContentLength ?? 0, lastModified: response.LastModified };
    } catch (error) {
      const mapped = toArtifactStoreError(error, 'head', uri);
      if (HatError.isInstance(mapped) && mapped.code === 'ARTIFACT_NOT_FOUND') return undefined;
      throw mapped;
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    validateKeyPrefix(prefix);
    const rootKey = this.prefix ? `${this.prefix}/` : '';
    let continuationToken: string | undefined;
    do {
      let page;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: `${rootKey}${prefix}`,
            ContinuationToken: continuationToken,
          }),
        );
      } catch (error) {
        throw toArtifactStoreError(error, 'list', `${this.rootUri}/${prefix}`);
      }
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue;
        const key = object.Key.slice(rootKey.length);
        yield {
          key,
          uri: `s3://${this.bucket}/${object.Key}`,
          bytes: object.Size ?? 0,
          lastModified: object.LastModified,
        };
      }
      continuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (continuationToken);
  }

  async delete(key: string): Promise<void> {
    const uri = this.uriOf(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKeyOf(key) }));
    } catch (error) {
      throw toArtifactStoreError(error, 'delete', uri);
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  private objectKeyOf(key: string): string {
    validateObjectKey(key);
    return this.prefix ? `${this.prefix}/${key}` : key;
  }
}

function isPrematureClose(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ERR_STREAM_PREMATURE_CLOSE';
}
