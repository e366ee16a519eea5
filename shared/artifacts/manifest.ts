import { z } from 'zod';
import { zodProblems } from '../config/zod-problems';
import { BadInputError, HatError, ProblemCollector } from '../errors';
import { codeVersion as currentCodeVersion } from '../version';
import type { ArtifactStore, ObjectInfo } from './artifact-store';
import { compareKeys } from './object-key';
import { decodeUtf8Strict } from './utf8';

export const MANIFEST_SCHEMA_VERSION = 1;

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex sha256');

/** One object a stage wrote. */
export const manifestObjectSchema = z.object({
  /** Key relative to the store root. */
  key: z.string().min(1),
  /** Full URI (`s3://...` or `file://...`). */
  uri: z.string().min(1),
  /** Hex sha256 of the stored bytes (compressed bytes for `.gz`). */
  sha256,
  /** Stored size in bytes. */
  bytes: z.number().int().nonnegative(),
  /** Records (JSONL lines, Parquet rows); absent for objects that are not record collections (reports). */
  records: z.number().int().nonnegative().optional(),
  /** Schema version of the records inside (e.g. the trajectory schema version). */
  schemaVersion: z.number().int().nonnegative(),
  /** Format of the bytes: `jsonl.gz`, `parquet`, `json`, `html`, `svg`, ... */
  format: z.string().min(1),
  /**
   * What the object holds within its stage's output when a stage writes several kinds of records
   * in one format (collect: `trajectories`, `rejected`, `review`, `tasks`), so a reader takes
   * only the kind it wants. Absent: the stage's main records.
   */
  kind: z.string().min(1).optional(),
});
export type ManifestObject = z.infer<typeof manifestObjectSchema>;

/** Where a stage's output came from: enough to tell whether a rerun would produce the same. */
export const lineageSchema = z.object({
  /** Every input artifact with the sha256 it had when read. */
  inputs: z.array(z.object({ uri: z.string().min(1), sha256 })),
  /** hashValue() of the stage config that produced the output. */
  configHash: z.string().min(1),
  /** Code version that wrote it (shared/version.ts codeVersion). */
  codeVersion: z.string().min(1),
});
export type Lineage = z.infer<typeof lineageSchema>;

/** `runs/<runId>/<stage>/manifest.json`: written last; its presence means the stage output is complete. */
export const manifestSchema = z.object({
  schemaVersion: z.literal(MANIFEST_SCHEMA_VERSION),
  stage: z.string().min(1),
  runId: z.string().min(1),
  /** Objects in key order. */
  objects: z.array(manifestObjectSchema),
  lineage: lineageSchema,
  /** ISO-8601 time the manifest was written. */
  createdAt: z.iso.datetime({ offset: true }),
  /** Stage-specific figures (counts, rates, timings); free-form. Default {}. */
  stats: z.record(z.string(), z.unknown()).default({}),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** What a stage supplies; the version, time and code version are filled in. */
export type ManifestInput = Omit<Manifest, 'schemaVersion' | 'createdAt' | 'lineage' | 'stats'> & {
  lineage: Omit<Lineage, 'codeVersion'> & { codeVersion?: string };
  stats?: Record<string, unknown>;
};

export interface WriteManifestOptions {
  /** Clock for `createdAt`; inject a fixed one for byte-identical manifests. Default `new Date()`. */
  clock?: () => Date;
  /** Check that every listed object exists with its recorded size before publishing. Default true. */
  verifyObjects?: boolean;
}

/** A manifest entry for an object a store put (its ObjectInfo carries the sha256). */
export function manifestObjectOf(
  info: ObjectInfo & { records?: number },
  details: { schemaVersion: number; format: string; records?: number; kind?: string },
): ManifestObject {
  if (!info.sha256)
    throw new HatError('MISSING_SHA256', `no sha256 known for ${info.uri}; use the ObjectInfo returned by put()`);
  const records = details.records ?? info.records;
  return {
    key: info.key,
    uri: info.uri,
    sha256: info.sha256,
    bytes: info.bytes,
    ...(records === undefined ? {} : { records }),
    schemaVersion: details.schemaVersion,
    format: details.format,
    ...(details.kind === undefined ? {} : { kind: details.kind }),
  };
}

/**
 * Publishes a stage's manifest. Call it after every object is written: by default it checks they
 * are all there, so a manifest never vouches for output that is missing.
 */
export async function writeManifest(
  store: ArtifactStore,
  key: string,
  input: ManifestInput,
  options: WriteManifestOptions = {},
): Promise<{ manifest: Manifest; info: ObjectInfo }> {
  const uri = store.uriOf(key);
  const candidate = {
    schemaVersion: MANIFEST_SCHEMA_VERSION,
    stage: input.stage,
    runId: input.runId,
    objects: [...input.objects].sort((left, right) => compareKeys(left.key, right.key)),
    lineage: {
      inputs: input.lineage.inputs,
      configHash: input.lineage.configHash,
      codeVersion: input.lineage.codeVersion ?? currentCodeVersion(),
    },
    createdAt: (options.clock ?? (() => new Date()))().toISOString(),
    stats: input.stats ?? {},
  };
  const manifest = parseManifest(candidate, uri);
  if (options.verifyObjects ?? true) {
    const missing = await findMissingObjects(store, manifest);
    if (missing.length > 0) {
      throw new HatError(
        'MANIFEST_OBJECT_MISSING',
        `refusing to write ${uri}: ${missing.length} listed object(s) are missing or differ in size: ${missing.slice(0, 5).join(', ')}`,
        {
          details: { missing },
        },
      );
    }
  }
  const info = await store.put(key, `${JSON.stringify(manifest, null, 2)}\n`, { contentType: 'application/json' });
  return { manifest, info };
}

/** Reads and validates a manifest; every problem is reported with its field path. */
export async function readManifest(store: ArtifactStore, key: string): Promise<Manifest> {
  const uri = store.uriOf(key);
  // A manifest names its objects' keys and URIs: a byte replaced by U+FFFD would name another object.
  const text = decodeUtf8Strict(await store.getBuffer(key), uri);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new BadInputError(
      'BAD_MANIFEST',
      `${uri}: not valid JSON (${(error as Error).message}); rerun the stage to rewrite it`,
    );
  }
  return parseManifest(value, uri);
}

/**
 * The idempotency check of a stage: its manifest when the output is complete (manifest present
 * and every object it lists present with its recorded size), else undefined, meaning (re)write.
 */
export async function stageOutputComplete(store: ArtifactStore, manifestKey: string): Promise<Manifest | undefined> {
  if (!(await store.head(manifestKey))) return undefined;
  const manifest = await readManifest(store, manifestKey);
  return (await findMissingObjects(store, manifest)).length === 0 ? manifest : undefined;
}

function parseManifest(value: unknown, uri: string): Manifest {
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    const problems = new ProblemCollector();
    problems.addAll(zodProblems(result.error, uri));
    problems.throwIfAny('BAD_MANIFEST', `${uri} is not a valid manifest; rerun the stage to rewrite it`);
  }
  return result.data as Manifest;
}

/** URIs of listed objects that are absent or whose size differs from the manifest's. */
async function findMissingObjects(store: ArtifactStore, manifest: Manifest): Promise<string[]> {
  const found = await Promise.all(
    manifest.objects.map(async (object) => {
      const info = await store.head(store.keyOf(object.uri));
      return info !== undefined && info.bytes === object.bytes ? undefined : object.uri;
    }),
  );
  return found.filter((uri): uri is string => uri !== undefined);
}
