import { z } from 'zod';
import { ProblemCollector } from '../errors';
import { zodProblems } from './zod-problems';

const positiveInt = z.coerce.number().int().positive();

/**
 * The process environment, parsed once at the edge (CLI start, worker start). An explicit CLI
 * option beats the variable; errors for a missing setting name both.
 */
export const envSchema = z.object({
  /** Redis connection URL. Default redis://127.0.0.1:6379. */
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  /** BullMQ key prefix; use a hash tag such as `{hat}` for Redis Cluster. Default `hat`. */
  HAT_REDIS_PREFIX: z.string().min(1).regex(/^[^\s:]+$/, 'must not contain spaces or ":"').default('hat'),
  /** Where run artifacts go: `s3://bucket/prefix` or `file:///abs/path`. Default: a local S3-compatible server the demo starts. */
  HAT_ARTIFACTS: z.string().regex(/^(s3|file):\/\//, 'must start with s3:// or file://').optional(),
  /** S3 endpoint for S3-compatible servers (MinIO, s3rver, Ceph); unset for AWS. */
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  /** Path-style addressing; defaults to true when S3_ENDPOINT is set. */
  S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).optional(),
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  AWS_SESSION_TOKEN: z.string().optional(),
  /** Default concurrency of a stage worker (jobs at once per process). */
  HAT_WORKER_CONCURRENCY: positiveInt.default(4),
  /** Concurrency of model-bound stages (collect, distill, rl, replay). */
  HAT_MODEL_CONCURRENCY: positiveInt.default(16),
  /** Largest job data accepted, in bytes (Redis carries references, not payloads). */
  HAT_JOB_DATA_LIMIT: positiveInt.default(64 * 1024),
  /** Bound on graceful shutdown after SIGTERM, in milliseconds. */
  HAT_SHUTDOWN_TIMEOUT_MS: positiveInt.default(30_000),
  HAT_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
});

export type HatEnv = z.infer<typeof envSchema>;

/** Parses the environment, reporting every problem in one pass (exit code 2). */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): HatEnv {
  const picked: Record<string, string | undefined> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = source[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const result = envSchema.safeParse(picked);
  if (!result.success) {
    const collector = new ProblemCollector();
    collector.addAll(zodProblems(result.error, 'environment'));
    collector.throwIfAny('BAD_ENV', 'The environment has invalid settings; fix the variables named below');
  }
  return result.data as HatEnv;
}
