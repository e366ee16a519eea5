import { z } from 'zod';
import type { ArtifactStore } from '../../shared/artifacts/artifact-store';
import { BadInputError } from '../../shared/errors';
import type { StageDeps } from '../stage-kit/define-stage';

/**
 * The promoted checkpoint: the one a gate (or an operator) judged good enough to build on. It is
 * a small pointer object under the artifact root, `checkpoints/promoted.json`, with every
 * promotion also kept under `checkpoints/history/` (written first, so the pointer never names a
 * promotion the history lacks). The next run reads it through a `latest` input:
 *
 * ```yaml
 * baseUrl: { latestCheckpoint: "s3://hat/", field: endpoint }
 * model: { latestCheckpoint: "s3://hat/", field: model }
 * ```
 *
 * `hat checkpoint list` shows the pointer and the history; `hat checkpoint promote` overrides it.
 */

export const PROMOTED_CHECKPOINT_SCHEMA_VERSION = 1;
export const promotedPointerKey = 'checkpoints/promoted.json';
export const promotionHistoryPrefix = 'checkpoints/history/';

export const promotedCheckpointSchema = z.object({
  schemaVersion: z.literal(PROMOTED_CHECKPOINT_SCHEMA_VERSION),
  /** OpenAI-compatible base URL serving the checkpoint. */
  endpoint: z.string().min(1),
  /** Model id it is served under. */
  model: z.string().min(1),
  /** The eval label it was scored under, when a gate promoted it. */
  label: z.string().optional(),
  /** The run whose gate promoted it (absent: promoted by hand). */
  runId: z.string().optional(),
  /** `gate` or `cli`. */
  promotedBy: z.enum(['gate', 'cli']),
  /** ISO-8601. */
  promotedAt: z.string(),
  /** Why: the gate's checks, or the operator's note. */
  reasons: z.array(z.string()).default([]),
  /** The candidate's metrics when the gate promoted it. */
  metrics: z.record(z.string(), z.number()).optional(),
  /** The eval scores it was judged on. */
  scoresUri: z.string().optional(),
});
export type PromotedCheckpoint = z.infer<typeof promotedCheckpointSchema>;

/** Where the pointer of one artifact root lives: a store and the root's key prefix in it ('' or ending in '/'). */
export interface PointerLocation {
  store: ArtifactStore;
  prefix: string;
}

/** The pointer location of an artifact root URI, through a store cache's `openObject`. */
export function pointerLocationOf(root: string, openObject: StageDeps['openObject']): PointerLocation {
  // The root opened as an object: its store holds the root folder, whose key is the prefix (as latest inputs open prefixes).
  const { store, key } = openObject(root.replace(/\/+$/, ''));
  return { store, prefix: key === '' ? '' : `${key}/` };
}

/** The promoted checkpoint under an artifact root, or undefined when none was promoted yet. */
export async function readPromotedCheckpoint(location: PointerLocation): Promise<PromotedCheckpoint | undefined> {
  const key = `${location.prefix}${promotedPointerKey}`;
  if (!(await location.store.head(key))) return undefined;
  const text = (await location.store.getBuffer(key)).toString('utf8');
  const parsed = promotedCheckpointSchema.safeParse(JSON.parse(text));
  if (!parsed.success) {
    throw new BadInputError(
      'BAD_PROMOTED_CHECKPOINT',
      `${location.store.uriOf(key)} is not a promoted-checkpoint record (${parsed.error.issues[0]?.message}); rewrite it with \`hat checkpoint promote\``,
    );
  }
  return parsed.data;
}

/** History key of a promotion: one per run (a retried gate rewrites its own entry), one per time for promotions by hand. */
export function promotionHistoryKey(record: Pick<PromotedCheckpoint, 'promotedAt' | 'runId' | 'promotedBy'>): string {
  if (record.runId !== undefined) return `${promotionHistoryPrefix}run-${record.runId}.json`;
  return `${promotionHistoryPrefix}${record.promotedBy}-${record.promotedAt.replace(/[-:.]/g, '')}.json`;
}

/** Records a promotion: the history entry first, then the pointer. Idempotent for the same record. */
export async function writePromotion(
  location: PointerLocation,
  record: PromotedCheckpoint,
): Promise<{ pointerUri: string; historyUri: string }> {
  const body = `${JSON.stringify(promotedCheckpointSchema.parse(record), null, 2)}\n`;
  const history = await location.store.put(`${location.prefix}${promotionHistoryKey(record)}`, body, {
    contentType: 'application/json',
  });
  const pointer = await location.store.put(`${location.prefix}${promotedPointerKey}`, body, {
    contentType: 'application/json',
  });
  return { pointerUri: pointer.uri, historyUri: history.uri };
}

/** Every promotion under an artifact root, oldest first. */
export async function listPromotions(location: PointerLocation): Promise<PromotedCheckpoint[]> {
  const records: PromotedCheckpoint[] = [];
  for await (const object of location.store.list(`${location.prefix}${promotionHistoryPrefix}`)) {
    if (!object.key.endsWith('.json')) continue;
    const parsed = promotedCheckpointSchema.safeParse(
      JSON.parse((await location.store.getBuffer(object.key)).toString('utf8')),
    );
    if (parsed.success) records.push(parsed.data);
  }
  return records.sort((left, right) =>
    left.promotedAt < right.promotedAt ? -1 : left.promotedAt > right.promotedAt ? 1 : 0,
  );
}

/** A `latest` input naming a field of the promoted checkpoint under an artifact root. */
export const latestCheckpointSpecSchema = z
  .object({
    /** The artifact root holding `checkpoints/promoted.json`, e.g. `s3://hat/`. */
    latestCheckpoint: z
      .string()
      .regex(
        /^(s3|file):\/\/.+/,
        'must be the s3://bucket/prefix/ or file:///dir/ artifact root holding checkpoints/promoted.json',
      ),
    /**
     * Which field: `endpoint` (a baseUrl), `model` (the served model id), or `checkpoint` (an
     * identity of this promotion, which changes only when the pointer moves: an eval model's
     * `checkpoint`, so its cached answers are reused until the next promotion).
     */
    field: z.enum(['endpoint', 'model', 'checkpoint']),
  })
  .strict();
export type LatestCheckpointSpec = z.infer<typeof latestCheckpointSpecSchema>;

/** One promotion's identity: who promoted what, when (the same record gives the same string). */
export function promotionIdentity(record: PromotedCheckpoint): string {
  return `promoted/${record.runId ?? record.promotedBy}/${record.label ?? record.model}@${record.promotedAt}`;
}

/** Stands in for the promoted checkpoint while a run is planned without resolving (`.invalid` never resolves). */
export function latestCheckpointPlaceholder(spec: LatestCheckpointSpec): string {
  return spec.field === 'endpoint' ? 'http://promoted-checkpoint.invalid/v1' : 'promoted-checkpoint.invalid';
}

/** Resolves a `latestCheckpoint` input: the field of the promoted checkpoint, or NO_LATEST_INPUT when none was promoted. */
export async function resolveLatestCheckpoint(
  spec: LatestCheckpointSpec,
  openObject: StageDeps['openObject'],
): Promise<{ partition: string; resolved: string }> {
  const root = spec.latestCheckpoint.replace(/\/+$/, '');
  const location = pointerLocationOf(root, openObject);
  const record = await readPromotedCheckpoint(location);
  if (!record) {
    throw new BadInputError(
      'NO_LATEST_INPUT',
      `no promoted checkpoint under ${spec.latestCheckpoint} (${promotedPointerKey} is missing); promote one first: hat checkpoint promote --endpoint <url> --model <name> --artifacts ${spec.latestCheckpoint}`,
    );
  }
  return {
    partition: `${record.model}@${record.promotedAt}`,
    resolved:
      spec.field === 'endpoint'
        ? record.endpoint
        : spec.field === 'checkpoint'
          ? promotionIdentity(record)
          : record.model,
  };
}
