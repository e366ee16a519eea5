import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import type { ArtifactStore, ObjectInfo } from '../../shared/artifacts/artifact-store';
import { jsonlGzipOptions } from '../../shared/artifacts/jsonl-writer';
import { zodProblems } from '../../shared/config/zod-problems';
import { BadInputError, formatProblem } from '../../shared/errors';
import { SampleSet, serializedSampleSetSchema } from '../../shared/metrics/sample-set';
import { loadProfileSchema } from './load-profile';
import { unreplayableSessionSchema } from './recorded-session';
import type { ReplayPartResult } from './replay-engine';
import { replayCallRecordSchema, replaySessionRecordSchema, replayTurnRecordSchema } from './replay-records';
import { targetInfoSchema } from './target-info';

export const REPLAY_PART_SCHEMA_VERSION = 1;

const counterReadingSchema = z.object({
  atEpochMs: z.number(),
  counters: z.object({
    drafts: z.number(),
    draftTokens: z.number(),
    acceptedTokens: z.number(),
    acceptedPerPosition: z.array(z.number()),
    present: z.boolean(),
  }),
  specDecodeNames: z.array(z.string()).optional(),
});

export const clientHealthSchema = z.object({
  eventLoopDelayP99Ms: z.number().nonnegative(),
  eventLoopDelayP999Ms: z.number().nonnegative().optional(),
  eventLoopDelayMaxMs: z.number().nonnegative(),
  eventLoopUtilization: z.number().min(0).max(1),
  bareLoopDelayP99Ms: z.number().nonnegative().optional(),
});

/**
 * What one part job writes (`part-NNNNN.json.gz`): its records and raw samples, the merge's
 * whole input. Part 0 also carries the sessions that could not be replayed (every part finds the
 * same ones; one report of them is enough).
 */
export const replayPartFileSchema = z.object({
  schemaVersion: z.literal(REPLAY_PART_SCHEMA_VERSION),
  part: z.object({ index: z.number().int().nonnegative(), count: z.number().int().positive() }),
  window: z.object({ startEpochMs: z.number(), endEpochMs: z.number(), durationMs: z.number().nonnegative() }),
  load: loadProfileSchema,
  warmup: z.object({
    sessions: z.number().int().nonnegative(),
    calls: z.number().int().nonnegative(),
    failedCalls: z.number().int().nonnegative(),
  }),
  target: targetInfoSchema,
  calls: z.array(replayCallRecordSchema),
  /** Viewer turns (absent from parts written before turns were measured). */
  turns: z.array(replayTurnRecordSchema).default([]),
  sessions: z.array(replaySessionRecordSchema),
  samples: serializedSampleSetSchema,
  specDecode: z.object({
    before: counterReadingSchema.optional(),
    after: counterReadingSchema.optional(),
    error: z.string().optional(),
  }),
  unreplayable: z.array(unreplayableSessionSchema),
  client: clientHealthSchema,
});
export type ReplayPartFile = z.infer<typeof replayPartFileSchema>;

export function partFileOf(
  result: ReplayPartResult,
  extra: Pick<ReplayPartFile, 'target' | 'unreplayable'>,
): ReplayPartFile {
  return {
    schemaVersion: REPLAY_PART_SCHEMA_VERSION,
    part: result.part,
    window: result.window,
    load: result.load,
    warmup: result.warmup,
    target: extra.target,
    calls: result.calls,
    turns: result.turns,
    sessions: result.sessions,
    samples: result.samples.toJSON(),
    specDecode: result.specDecode,
    unreplayable: extra.unreplayable,
    client: result.client,
  };
}

/** Gzip JSON with the artifact gzip settings: the same part gives the same bytes. */
export async function writeReplayPartFile(
  store: ArtifactStore,
  key: string,
  file: ReplayPartFile,
): Promise<ObjectInfo> {
  return store.put(key, gzipSync(JSON.stringify(file), jsonlGzipOptions), { contentType: 'application/gzip' });
}

export async function readReplayPartFile(
  store: ArtifactStore,
  key: string,
): Promise<ReplayPartFile & { sampleSet: SampleSet }> {
  const uri = store.uriOf(key);
  let value: unknown;
  try {
    value = JSON.parse(gunzipSync(await store.getBuffer(key)).toString('utf8'));
  } catch (error) {
    throw new BadInputError(
      'BAD_REPLAY_PART',
      `${uri} is not a gzip JSON replay part (${(error as Error).message}); rerun the replay stage`,
      { cause: error },
    );
  }
  const parsed = replayPartFileSchema.safeParse(value);
  if (!parsed.success) {
    throw new BadInputError(
      'BAD_REPLAY_PART',
      `${uri} is not a replay part: ${zodProblems(parsed.error).slice(0, 3).map(formatProblem).join('; ')}; rerun the replay stage`,
    );
  }
  return { ...parsed.data, sampleSet: SampleSet.fromJSON(parsed.data.samples, uri) };
}
