import { z } from 'zod';
import { defaultLargestRecordBytes } from '../artifacts/record-limit';
import { ProblemCollector } from '../errors';
import { credentialsProblem, describeUrlCredentials } from './url-credentials';
import { zodProblems } from './zod-problems';

const positiveInt = z.coerce.number().int().positive();

/** A setting holding a URL with credentials is refused without repeating them. */
function refuseCredentials(value: string, context: z.RefinementCtx): void {
  const found = describeUrlCredentials(value);
  if (found) context.addIssue({ code: 'custom', message: credentialsProblem(found) });
}

/**
 * The process environment, parsed once at the edge (CLI start, worker start). An explicit CLI
 * option beats the variable; errors for a missing setting name both.
 */
export const envSchema = z.object({
  /** Redis connection URL. Default redis://127.0.0.1:6379. */
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  /**
   * Redis Cluster seed nodes, comma-separated `host:port` (or `redis://[user:pass@]host:port`,
   * `rediss://` for TLS; the first entry's credentials and TLS apply to every node). When set,
   * queues use an ioredis Cluster connection instead of REDIS_URL, and HAT_REDIS_PREFIX must be
   * hash-tagged (default `{hat}`) so every key of a flow lands in one slot.
   */
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(
      /^\s*(rediss?:\/\/[^\s,]+|[^\s,:/]+:\d+)(\s*,\s*(rediss?:\/\/[^\s,]+|[^\s,:/]+:\d+))*\s*$/,
      'must be a comma-separated list of host:port (or redis://host:port) seed nodes',
    )
    .optional(),
  /** BullMQ key prefix; use a hash tag such as `{hat}` for Redis Cluster. Default `hat` (`{hat}` with REDIS_CLUSTER_NODES). */
  HAT_REDIS_PREFIX: z
    .string()
    .min(1)
    .regex(/^[^\s:]+$/, 'must not contain spaces or ":"')
    .default('hat'),
  /** Where run artifacts go: `s3://bucket/prefix` or `file:///abs/path`. Default: a local S3-compatible server the demo starts. */
  HAT_ARTIFACTS: z
    .string()
    .regex(/^(s3|file):\/\//, 'must start with s3:// or file://')
    .superRefine(refuseCredentials)
    .optional(),
  /** S3 endpoint for S3-compatible servers (MinIO, s3rver, Ceph); unset for AWS. */
  S3_ENDPOINT: z.string().url().superRefine(refuseCredentials).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  /** Path-style addressing; defaults to true when S3_ENDPOINT is set. */
  S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).optional(),
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  AWS_SESSION_TOKEN: z.string().optional(),
  /**
   * Default concurrency of a stage worker (jobs at once per process). Unset: the cores the process
   * may use (cpu-budget.ts) for CPU-bound stages, 4 for the others.
   */
  HAT_WORKER_CONCURRENCY: positiveInt.optional(),
  /**
   * How long a sandbox thread of a CPU-heavy stage (augment, shard) waits for its next job
   * before it ends, ms, handing its memory (a tokenizer, caches, its heap) back to the system; the
   * next job starts a new one (a second or two). 0 keeps threads for the worker's life. Default
   * 5000: a worker that runs several stages holds one stage's threads at a time.
   */
  HAT_SANDBOX_IDLE_MS: z.coerce.number().int().min(0).default(5_000),
  /** Concurrency of model-bound stages (collect, distill, rl, replay). */
  HAT_MODEL_CONCURRENCY: positiveInt.default(16),
  /** Largest job data accepted, in bytes (Redis carries references, not payloads). */
  HAT_JOB_DATA_LIMIT: positiveInt.default(64 * 1024),
  /** Bound on graceful shutdown after SIGTERM, in milliseconds. */
  HAT_SHUTDOWN_TIMEOUT_MS: positiveInt.default(30_000),
  /**
   * Lock duration of every job a worker takes, ms: a job whose worker stops renewing its lock for
   * this long (a killed process) counts as stalled. Default: each stage's own, else 30000.
   */
  HAT_LOCK_DURATION_MS: positiveInt.optional(),
  /** How often workers look for stalled jobs and hand them back to the queue, ms. Default 30000. */
  HAT_STALLED_INTERVAL_MS: positiveInt.optional(),
  /**
   * How long `hat run --wait` keeps following a run while Redis does not answer, ms, before it
   * stops with REDIS_UNAVAILABLE (the run itself goes on). Default 120000.
   */
  HAT_WATCH_REDIS_TIMEOUT_MS: positiveInt.default(120_000),
  /**
   * How long a worker (and `hat stage`) waits out a storage fault of one artifact operation, ms:
   * S3 5xx after the SDK's own attempts, a read-only or full file system, a lost mount. 0 turns it
   * off (the job's own attempts still apply). Default 300000.
   */
  HAT_STORAGE_RETRY_MS: z.coerce.number().int().min(0).default(300_000),
  /** Longest wait between two storage retries, ms (exponential from 500 ms, with jitter). Default 30000. */
  HAT_STORAGE_RETRY_MAX_DELAY_MS: positiveInt.default(30_000),
  /**
   * Largest JSONL record (one line, decompressed) a reader accepts, bytes; a longer one is refused
   * with RECORD_TOO_LARGE naming the file and line. Default 16777216 (16 MiB).
   */
  HAT_MAX_RECORD_BYTES: positiveInt.default(defaultLargestRecordBytes),
  HAT_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /**
   * Bearer token of `hat dashboard` (`--token` beats it; at least 16 characters, checked when the
   * dashboard starts so a worker sharing the Secret never fails over it). A secret: never logged.
   */
  HAT_DASHBOARD_TOKEN: z.string().optional(),
});

export type HatEnv = z.infer<typeof envSchema>;

/** Parses the environment, reporting every problem in one pass (exit code 2). */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): HatEnv {
  const picked: Record<string, string | undefined> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = source[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  // Redis Cluster keeps a multi-key operation to one slot, and a BullMQ flow spans queues: the
  // shared prefix must carry a hash tag, so cluster mode defaults to `{hat}` instead of `hat`.
  if (picked.REDIS_CLUSTER_NODES !== undefined && picked.HAT_REDIS_PREFIX === undefined)
    picked.HAT_REDIS_PREFIX = clusterDefaultPrefix;
  const result = envSchema.safeParse(picked);
  const collector = new ProblemCollector();
  if (!result.success) collector.addAll(zodProblems(result.error, 'environment'));
  else if (result.data.REDIS_CLUSTER_NODES !== undefined && !hasHashTag(result.data.HAT_REDIS_PREFIX)) {
    collector.add({
      file: 'environment',
      path: 'HAT_REDIS_PREFIX',
      message: `"${result.data.HAT_REDIS_PREFIX}" has no hash tag, but REDIS_CLUSTER_NODES is set; use a prefix such as {${result.data.HAT_REDIS_PREFIX}} (or unset it for the default ${clusterDefaultPrefix})`,
    });
  }
  collector.throwIfAny('BAD_ENV', 'The environment has invalid settings; fix the variables named below');
  return result.data as HatEnv;
}

/** HAT_REDIS_PREFIX when REDIS_CLUSTER_NODES is set and no prefix is given. */
export const clusterDefaultPrefix = '{hat}';

/** Whether a key prefix holds a Redis Cluster hash tag: a non-empty `{...}` (the first `{` and the next `}`). */
export function hasHashTag(prefix: string): boolean {
  const open = prefix.indexOf('{');
  if (open < 0) return false;
  const close = prefix.indexOf('}', open + 1);
  return close > open + 1;
}
