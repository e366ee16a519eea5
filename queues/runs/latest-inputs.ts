import { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { compareKeys } from '../../shared/artifacts/object-key';
import { BadInputError, HatError } from '../../shared/errors';
import { formatPath, type PathSegment } from '../../shared/harness/source-document';
import type { StageDeps } from '../stage-kit/define-stage';
import {
  latestCheckpointPlaceholder,
  latestCheckpointSpecSchema,
  resolveLatestCheckpoint,
  type LatestCheckpointSpec,
} from './promoted-checkpoint';

/**
 * `latest` inputs of a run config: a stage config value may name "the newest partition under a
 * prefix" or "the current harness version under a prefix" instead of a fixed URI. They are
 * resolved when a run is created (`hat run`, or the scheduled kickoff job when it runs, never when
 * the schedule is set), and what they resolved to is recorded in the run job and the run manifest
 * (`resolvedInputs`).
 *
 * ```yaml
 * collect:
 *   # the newest dt=YYYY-MM-DD partition that has the file (and the marker, when given)
 *   tasks: { latest: "s3://hat/tasks/imported/", partition: "dt=YYYY-MM-DD", file: tasks.jsonl.gz }
 *   # the harness version CURRENT names, else the highest version folder holding harness.yaml
 *   harness: { latestHarness: "s3://hat/harness/live-host/" }
 * ```
 *
 * Partitions: `partition` is `lexicographic` (the child folder with the greatest name) or a
 * pattern of one or more `/`-separated folder names with the fields YYYY, MM, DD, HH and mm
 * (`dt=YYYY-MM-DD`, `year=YYYY/month=MM/day=DD`), newest by those fields. A partition still being
 * written is passed over when `marker` (e.g. `_SUCCESS`) or `file` is given and missing from it.
 * With `file` the input is that one object; without, it is every object of the partition (in key
 * order, leaving out the marker and names starting with `_` or `.`), which fits the fields that
 * take a list of URIs (`collect.tasks`, `augment.trajectories`, ...).
 *
 * Harness versions: a `CURRENT` object directly under the prefix, holding a version folder name,
 * wins (operators roll back by rewriting one small object); without it, the highest version
 * folder that holds `harness.yaml`, compared as versions (`v2` < `v10`, `1.9.0` < `1.10.0`).
 *
 * Listing walks every object under the prefix (the store interface lists recursively), which is
 * fine for the hundreds of partitions a retention policy keeps; keep such prefixes pruned.
 */

const prefixUri = z
  .string()
  .regex(/^(s3|file):\/\/.+/, 'must be an s3://bucket/prefix/ or file:///absolute/dir/ URI')
  .transform((uri) => (uri.endsWith('/') ? uri : `${uri}/`));
const singleName = z
  .string()
  .min(1)
  .regex(/^(?!\.{1,2}$)[^/\\\u0000-\u001f]+$/, 'must be one object name without "/" (e.g. tasks.jsonl.gz or _SUCCESS)');

/** Fields a partition pattern may hold, most significant first (their order gives "newest"). */
const partitionFields = ['YYYY', 'MM', 'DD', 'HH', 'mm'] as const;

export const latestPartitionSpecSchema = z
  .object({
    /** Prefix whose child folders are the partitions, e.g. `s3://logs/live-room/`. */
    latest: prefixUri,
    /** `lexicographic` (default) or a folder pattern with YYYY, MM, DD, HH, mm, e.g. `dt=YYYY-MM-DD`. */
    partition: z
      .string()
      .min(1)
      .default('lexicographic')
      .refine(
        (pattern) => pattern === 'lexicographic' || partitionFields.some((field) => pattern.includes(field)),
        'must be "lexicographic" or a pattern with YYYY, MM, DD, HH or mm, e.g. "dt=YYYY-MM-DD"',
      ),
    /** The one object of the partition to use, e.g. `tasks.jsonl.gz`; partitions without it are passed over. */
    file: z
      .string()
      .min(1)
      .regex(
        /^(?!\/)(?!.*(^|\/)\.{1,2}(\/|$)).+$/,
        'must be a relative key inside the partition without "." or ".." segments',
      )
      .optional(),
    /** An object that marks a partition complete, e.g. `_SUCCESS`; partitions without it are passed over. */
    marker: singleName.optional(),
  })
  .strict();
export type LatestPartitionSpec = z.infer<typeof latestPartitionSpecSchema>;

export const latestHarnessSpecSchema = z
  .object({
    /** Prefix holding harness versions (`<version>/harness.yaml`) and optionally `CURRENT`. */
    latestHarness: prefixUri,
  })
  .strict();
export type LatestHarnessSpec = z.infer<typeof latestHarnessSpecSchema>;

/** `{ latestCheckpoint: <artifact root>, field: endpoint | model }`: the promoted checkpoint (queues/runs/promoted-checkpoint.ts). */
export type LatestSpec = LatestPartitionSpec | LatestHarnessSpec | LatestCheckpointSpec;

/** What one `latest` spec resolved to, as the run job and the run manifest record it. */
export const resolvedInputSchema = z.object({
  /** Where the spec sits in the run config, e.g. `stages.collect.tasks`. */
  path: z.string(),
  /** The spec as written (defaults applied). */
  spec: z.record(z.string(), z.unknown()),
  /** The partition or harness version chosen. */
  partition: z.string(),
  /** One URI (a `file`, a harness version) or every object of the partition. */
  resolved: z.union([z.string(), z.array(z.string())]),
  /** Newer partitions passed over because they lacked the marker or the file. */
  skipped: z.array(z.string()).optional(),
  /** ISO-8601 time of the resolution. */
  resolvedAt: z.string(),
});
export type ResolvedInput = z.infer<typeof resolvedInputSchema>;

/** A spec found in a run config, with where it sits. */
export interface LatestSpecLocation {
  path: PathSegment[];
  spec: LatestSpec;
}

/** Whether a config value is written as a `latest` spec (valid or not). */
export function isLatestSpecValue(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    ('latest' in value || 'latestHarness' in value || 'latestCheckpoint' in value)
  );
}

/**
 * Every `latest` spec under `stages`, each checked against its schema. Problems carry paths
 * (`stages.collect.tasks.partition`) for the config's locator.
 */
export function findLatestSpecs(
  stages: unknown,
  basePath: PathSegment[] = ['stages'],
): { specs: LatestSpecLocation[]; problems: Array<{ path: PathSegment[]; message: string }> } {
  const specs: LatestSpecLocation[] = [];
  const problems: Array<{ path: PathSegment[]; message: string }> = [];
  const visit = (value: unknown, path: PathSegment[]) => {
    if (isLatestSpecValue(value)) {
      const schema =
        'latestHarness' in value
          ? latestHarnessSpecSchema
          : 'latestCheckpoint' in value
            ? latestCheckpointSpecSchema
            : latestPartitionSpecSchema;
      const parsed = (schema as z.ZodType<LatestSpec>).safeParse(value);
      if (parsed.success) specs.push({ path, spec: parsed.data });
      else
        for (const issue of parsed.error.issues)
          problems.push({ path: [...path, ...(issue.path as PathSegment[])], message: issueMessage(issue) });
      return;
    }
    if (Array.isArray(value)) value.forEach((item, index) => visit(item, [...path, index]));
    else if (value !== null && typeof value === 'object')
      for (const [key, item] of Object.entries(value)) visit(item, [...path, key]);
  };
  visit(stages, basePath);
  return { specs, problems };
}

function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys')
    return `unknown key(s) ${issue.keys.map((key) => JSON.stringify(key)).join(', ')}; a latest input takes latest, partition, file and marker (or latestHarness alone)`;
  return issue.message;
}

/** The value a spec stands for before it is resolved (planning without listing, e.g. `hat schedule set`). */
export function latestPlaceholder(spec: LatestSpec): string | string[] {
  if ('latestCheckpoint' in spec) return latestCheckpointPlaceholder(spec);
  if ('latestHarness' in spec) return `${spec.latestHarness}CURRENT-VERSION`;
  const partition = spec.partition === 'lexicographic' ? 'LATEST-PARTITION' : spec.partition;
  return spec.file ? `${spec.latest}${partition}/${spec.file}` : [`${spec.latest}${partition}/`];
}

export interface ResolveLatestOptions {
  /** The store and key of a URI (a StoreCache's `openObject`). */
  openObject: StageDeps['openObject'];
  /** Time recorded as `resolvedAt`. */
  now: Date;
}

/**
 * Resolves every `latest` spec of a run config's stages by listing its prefix. Never throws for
 * what it finds (or does not find): each unresolvable spec is a problem at its path, so a run
 * reports it with every other problem of its config.
 */
export async function resolveLatestInputs(
  config: unknown,
  options: ResolveLatestOptions,
): Promise<{ resolved: ResolvedInput[]; problems: Array<{ path: PathSegment[]; message: string }> }> {
  const stages = typeof config === 'object' && config !== null ? (config as { stages?: unknown }).stages : undefined;
  const { specs, problems } = findLatestSpecs(stages);
  const resolved: ResolvedInput[] = [];
  for (const { path, spec } of specs) {
    try {
      const result =
        'latestHarness' in spec
          ? await resolveHarness(spec, options)
          : 'latestCheckpoint' in spec
            ? await resolveLatestCheckpoint(spec, options.openObject)
            : await resolvePartition(spec, options);
      resolved.push({ path: formatPath(path), spec: { ...spec }, ...result, resolvedAt: options.now.toISOString() });
    } catch (error) {
      if (!HatError.isInstance(error) || error.retryable) throw error;
      problems.push({ path, message: error.message });
    }
  }
  return { resolved, problems };
}

/** The store and key prefix (ending in `/`) of a prefix URI. */
function openPrefix(uri: string, openObject: StageDeps['openObject']): { store: ArtifactStore; prefix: string } {
  const { store, key } = openObject(uri.replace(/\/+$/, ''));
  return { store, prefix: key === '' ? '' : `${key}/` };
}

interface Partition {
  name: string;
  order: string;
  objects: string[];
  keys: Set<string>;
}

/** Turns `dt=YYYY-MM-DD` into a matcher of folder names that yields the fields in significance order. */
function partitionMatcher(pattern: string): { segments: number; order(name: string): string | undefined } {
  if (pattern === 'lexicographic') return { segments: 1, order: (name) => name };
  const fields: string[] = [];
  const source = pattern.replace(/YYYY|MM|DD|HH|mm|[.*+?^${}()|[\]\\]/g, (token) => {
    if ((partitionFields as readonly string[]).includes(token)) {
      fields.push(token);
      return token === 'YYYY' ? '(\\d{4})' : '(\\d{2})';
    }
    return `\\${token}`;
  });
  const regex = new RegExp(`^${source}$`);
  return {
    segments: pattern.split('/').length,
    order(name) {
      const match = regex.exec(name);
      if (!match) return undefined;
      const values = new Map(fields.map((field, index) => [field, match[index + 1]]));
      return partitionFields.map((field) => values.get(field) ?? (field === 'YYYY' ? '0000' : '00')).join('');
    },
  };
}

async function resolvePartition(
  spec: LatestPartitionSpec,
  options: ResolveLatestOptions,
): Promise<Omit<ResolvedInput, 'path' | 'spec' | 'resolvedAt'>> {
  const { store, prefix } = openPrefix(spec.latest, options.openObject);
  const matcher = partitionMatcher(spec.partition);
  const partitions = new Map<string, Partition>();
  for await (const object of store.list(prefix)) {
    const segments = object.key.slice(prefix.length).split('/');
    if (segments.length <= matcher.segments) continue;
    const name = segments.slice(0, matcher.segments).join('/');
    const order = matcher.order(name);
    if (order === undefined) continue;
    let partition = partitions.get(name);
    if (!partition) {
      partition = { name, order, objects: [], keys: new Set() };
      partitions.set(name, partition);
    }
    const inside = segments.slice(matcher.segments).join('/');
    partition.keys.add(inside);
    const last = segments[segments.length - 1] ?? '';
    if (inside !== spec.marker && !last.startsWith('_') && !last.startsWith('.')) partition.objects.push(object.key);
  }
  const newestFirst = [...partitions.values()].sort(
    (left, right) => compareKeys(right.order, left.order) || compareKeys(right.name, left.name),
  );
  const complete = (partition: Partition) =>
    (spec.marker === undefined || partition.keys.has(spec.marker)) &&
    (spec.file === undefined ? partition.objects.length > 0 : partition.keys.has(spec.file));
  const chosen = newestFirst.find(complete);
  const requirement = [spec.file ? `holding ${spec.file}` : 'holding objects', spec.marker ? `and ${spec.marker}` : '']
    .filter(Boolean)
    .join(' ');
  if (!chosen) {
    throw new BadInputError(
      'NO_LATEST_INPUT',
      `no partition ${spec.partition === 'lexicographic' ? '' : `matching ${spec.partition} `}${requirement} under ${spec.latest}` +
        `${
          newestFirst.length > 0
            ? ` (found ${newestFirst.length} incomplete: ${newestFirst
                .slice(0, 3)
                .map((partition) => partition.name)
                .join(', ')})`
            : ''
        }; ` +
        'write the input there first, or point latest at the prefix that holds the partitions',
    );
  }
  const skipped = newestFirst.slice(0, newestFirst.indexOf(chosen)).map((partition) => partition.name);
  const partitionPrefix = `${prefix}${chosen.name}/`;
  const resolved = spec.file
    ? store.uriOf(`${partitionPrefix}${spec.file}`)
    : chosen.objects.map((key) => store.uriOf(key));
  return { partition: chosen.name, resolved, ...(skipped.length > 0 ? { skipped } : {}) };
}

/** `CURRENT` under a harness prefix names the version in use. */
export const currentHarnessPointer = 'CURRENT';
const harnessFile = 'harness.yaml';

async function resolveHarness(
  spec: LatestHarnessSpec,
  options: ResolveLatestOptions,
): Promise<Omit<ResolvedInput, 'path' | 'spec' | 'resolvedAt'>> {
  const { store, prefix } = openPrefix(spec.latestHarness, options.openObject);
  const versions = new Set<string>();
  let hasPointer = false;
  for await (const object of store.list(prefix)) {
    const relative = object.key.slice(prefix.length);
    if (relative === currentHarnessPointer) hasPointer = true;
    const [version, file, ...rest] = relative.split('/');
    if (version !== undefined && file === harnessFile && rest.length === 0) versions.add(version);
  }
  let version: string | undefined;
  if (hasPointer) {
    version = (await store.getBuffer(`${prefix}${currentHarnessPointer}`)).toString('utf8').trim();
    if (!/^(?!\.{1,2}$)[A-Za-z0-9._-]+$/.test(version)) {
      throw new BadInputError(
        'BAD_HARNESS_POINTER',
        `${spec.latestHarness}${currentHarnessPointer} holds ${JSON.stringify(version.slice(0, 80))}, not a version folder name; write the name of a folder under ${spec.latestHarness} (e.g. v12) into it`,
      );
    }
    if (!versions.has(version)) {
      throw new BadInputError(
        'BAD_HARNESS_POINTER',
        `${spec.latestHarness}${currentHarnessPointer} names version "${version}", but ${spec.latestHarness}${version}/${harnessFile} does not exist; upload that version or fix the pointer`,
      );
    }
  } else {
    version = [...versions].sort(compareVersions).pop();
  }
  if (version === undefined) {
    throw new BadInputError(
      'NO_LATEST_INPUT',
      `no harness version under ${spec.latestHarness}: expected <version>/${harnessFile} folders (and optionally a ${currentHarnessPointer} object naming one); upload a harness there first`,
    );
  }
  return { partition: version, resolved: store.uriOf(`${prefix}${version}`) };
}

/** Orders version names: digit runs compare as numbers, the rest as text (`v2` < `v10`, `1.9.0` < `1.10.0`). */
export function compareVersions(left: string, right: string): number {
  const pieces = (text: string) => text.match(/\d+|\D+/g) ?? [];
  const a = pieces(left);
  const b = pieces(right);
  for (let index = 0; index < Math.max(a.length, b.length); index++) {
    const x = a[index];
    const y = b[index];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const bothNumbers = /^\d/.test(x) && /^\d/.test(y);
    const order = bothNumbers
      ? Number(BigInt(x) - BigInt(y) > 0n) - Number(BigInt(x) - BigInt(y) < 0n)
      : compareKeys(x, y);
    if (order !== 0) return order;
  }
  return 0;
}
