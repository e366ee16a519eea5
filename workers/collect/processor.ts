/**
 * collect stage. Input: tasks (URIs of gzip JSONL task sets, or generator parameters), a harness
 * (directory or s3:// prefix; default the sample live-host harness), the teacher (a model config:
 * `openai` against any OpenAI-compatible server, or `scripted` for the simulator's expert),
 * samples per task, the selection rule (best-of-N or all, minimum reward), max steps/turns,
 * sampling, tasks per part, seed.
 * Plan: reads and checks every input before writing anything (the harness loads, every task line
 * matches the task schema, task ids are unique, the teacher config builds and its API key is
 * readable), then writes the task slices `tasks/part-NNNNN.jsonl.gz`, one per part.
 * Part i writes `part-NNNNN.accepted.jsonl.gz` (Trajectory records), `part-NNNNN.rejected.jsonl.gz`
 * (Trajectory records with `meta.rejection: {reason, detail}`) and
 * `_parts/part-NNNNN.review.jsonl.gz`, in task order; progress is tasks done / total.
 * Finish writes `review.jsonl.gz` (tasks none of whose samples was accepted), `stats.json`,
 * `report.html`, then `manifest.json` last (every object tagged with its `kind`).
 * Idempotency: keys come from the part index; trajectory ids from (task, harness, sample, seed,
 * teacher), and a scripted teacher plays on a simulated clock, so the same tasks and seed give
 * byte-identical trajectories, in-process or through queues; a part whose marker matches its
 * input is not redone, a retried part rewrites only its own objects.
 * Retried: transient store faults; a teacher that failed every episode of the part with a
 * retryable error after the client's own retries (server down: TEACHER_UNAVAILABLE, honouring
 * Retry-After). Not retried, but recorded: one episode's model error (status model_error, the
 * task listed for review when no sample succeeded). Never retried: bad input (missing or
 * malformed task sets, a bad harness or teacher config, a missing API key) and a teacher that
 * refused every episode (TEACHER_REJECTED).
 * Secrets: the teacher config names apiKeyEnv/apiKeyFile only; the key is read in the process
 * that calls the server and never enters job data, artifacts or logs.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, type ManifestObject } from '../../shared/artifacts/manifest';
import { hashValue } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import { TASK_SCHEMA_VERSION, taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { TRAJECTORY_SCHEMA_VERSION } from '../../shared/trajectory/trajectory';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import {
  collectContract,
  reviewEntrySchema,
  type CollectInput,
  type CollectOutput,
  type CollectPartInput,
  type CollectPartOutput,
  type ReviewEntry,
} from './collect-contract';
import { collectPart, collectPartKeys } from './collect-part';
import { COLLECT_STATS_SCHEMA_VERSION, collectReportHtml, type CollectStatsDocument } from './collect-report';
import { deriveFigures, mergeCategoryCounts, rejectedTotal } from './collect-stats';
import { loadCollectTasks } from './collect-tasks';
import { writtenObjectOf } from '../../queues/stage-kit/written-object';
import { openTeacher } from './open-teacher';
import { loadRelabelPlan } from './relabel-tasks';

const reviewObject = 'review.jsonl.gz';
const statsObject = 'stats.json';
const reportObject = 'report.html';
/** Review entries shown in the HTML report (all of them are in review.jsonl.gz). */
const reportedReviewEntries = 50;
const REVIEW_SCHEMA_VERSION = 1;

/** A local harness path made absolute (workers may run elsewhere than where the config was read); URIs stay. */
function harnessUriOf(input: Pick<CollectInput, 'harness'>): string | undefined {
  if (input.harness === undefined || /^[a-z][a-z0-9+.-]*:\/\//i.test(input.harness)) return input.harness;
  return isAbsolute(input.harness) ? input.harness : resolve(input.harness);
}

/** Checks every input, then writes the task slices and returns one part per slice. */
export async function planCollect(input: CollectInput, deps: StageDeps): Promise<CollectPartInput[]> {
  const harnessUri = harnessUriOf(input);
  const harness = await loadHarnessFromUri(harnessUri ?? sampleHarnessDirectory(), deps.openObject);
  const hash = harnessHash(harness);
  // Builds the teacher once: a bad config or an unreadable API key fails the stage here, once.
  await openTeacher(input.teacher, { harness, tasks: [] }).close?.();
  const seed = input.seed ?? deps.run.seed;
  if (input.generate !== undefined && input.relabel === undefined) {
    // Each part generates and writes its own slice; the first task is made here so a generator
    // that cannot work (a catalog too small) fails the stage before any part runs.
    await loadCollectTasks({ generate: { ...input.generate, count: 1 } }, deps.openObject);
    const harnessInput = { ...(harnessUri === undefined ? {} : { uri: harnessUri }), hash };
    const lineage = [{ uri: harnessLineageUriOf(harnessUri), sha256: hash }];
    return Array.from({ length: Math.ceil(input.generate.count / input.tasksPerPart) }, (_, index) => {
      const start = index * input.tasksPerPart;
      const count = Math.min(input.tasksPerPart, input.generate!.count - start);
      return partInputOf(
        input,
        index,
        { harness: harnessInput },
        { generate: { ...input.generate!, start, count } },
        seed,
        lineage,
      );
    });
  }
  const { tasks, lineage } = await loadCollectTasks(input, deps.openObject);

  const harnessLineageUri = harnessLineageUriOf(harnessUri);
  const relabel =
    input.relabel === undefined ? undefined : await loadRelabelPlan(input.relabel, tasks, deps.openObject);
  // What the parts play: every task under the harness, or each relabelled task under its variant.
  const batches: Array<{ harness: CollectPartInput['harness']; variant?: CollectPartInput['variant']; tasks: Task[] }> =
    relabel
      ? relabel.groups.map((group) => ({
          harness: { uri: group.harnessUri, hash: group.hash },
          variant: { hash: group.variantHash, ...(group.families ? { families: group.families } : {}) },
          tasks: group.tasks,
        }))
      : [{ harness: { ...(harnessUri === undefined ? {} : { uri: harnessUri }), hash }, tasks }];
  const partLineage = [...lineage, ...(relabel ? relabel.lineage : [{ uri: harnessLineageUri, sha256: hash }])];
  const parts: CollectPartInput[] = [];
  for (const batch of batches) {
    for (let start = 0; start < batch.tasks.length; start += input.tasksPerPart) {
      parts.push(
        await planPart(
          input,
          deps,
          parts.length,
          batch,
          batch.tasks.slice(start, start + input.tasksPerPart),
          seed,
          partLineage,
        ),
      );
    }
  }
  return parts;
}

/** The harness as lineage records it: its URI, or the file URL of a local directory. */
function harnessLineageUriOf(harnessUri: string | undefined): string {
  return harnessUri === undefined || !harnessUri.includes('://')
    ? pathToFileURL(harnessUri ?? sampleHarnessDirectory()).href
    : harnessUri;
}

/** Writes one part's task slice and returns its input. */
async function planPart(
  input: CollectInput,
  deps: StageDeps,
  index: number,
  batch: { harness: CollectPartInput['harness']; variant?: CollectPartInput['variant'] },
  slice: Task[],
  seed: string,
  lineage: CollectPartInput['lineage'],
): Promise<CollectPartInput> {
  const written = await writeJsonl(deps.store, collectPartKeys(deps, index).tasks, slice, { schema: taskSchema });
  return partInputOf(input, index, batch, { tasks: writtenObjectOf(written) }, seed, lineage);
}

function partInputOf(
  input: CollectInput,
  index: number,
  batch: { harness: CollectPartInput['harness']; variant?: CollectPartInput['variant'] },
  source: Pick<CollectPartInput, 'tasks' | 'generate'>,
  seed: string,
  lineage: CollectPartInput['lineage'],
): CollectPartInput {
  return {
    index,
    ...source,
    harness: batch.harness,
    ...(batch.variant ? { variant: batch.variant } : {}),
    teacher: input.teacher,
    samplesPerTask: input.samplesPerTask,
    selection: input.selection,
    maxSteps: input.maxSteps,
    ...(input.maxTurns === undefined ? {} : { maxTurns: input.maxTurns }),
    ...(input.sampling === undefined ? {} : { sampling: input.sampling }),
    ...(input.episodeTimeoutMs === undefined ? {} : { episodeTimeoutMs: input.episodeTimeoutMs }),
    concurrency: input.concurrency,
    seed,
    lineage,
  };
}

export function createCollectProcessor(deps: StageDeps) {
  return (part: CollectPartInput): Promise<CollectPartOutput> => collectPart(part, deps);
}

/** Merges the review lists, writes stats and the report, then the manifest. */
export async function finishCollect(
  input: CollectInput,
  parts: CollectPartOutput[],
  deps: StageDeps,
): Promise<CollectOutput> {
  const harness = await loadHarnessFromUri(harnessUriOf(input) ?? sampleHarnessDirectory(), deps.openObject);
  const seed = input.seed ?? deps.run.seed;
  const objects: ManifestObject[] = [];
  for (const part of parts) {
    objects.push(
      manifestObjectOf(part.tasks, { schemaVersion: TASK_SCHEMA_VERSION, format: 'jsonl.gz', kind: 'tasks' }),
    );
    objects.push(
      manifestObjectOf(part.accepted, {
        schemaVersion: TRAJECTORY_SCHEMA_VERSION,
        format: 'jsonl.gz',
        kind: 'trajectories',
      }),
    );
    objects.push(
      manifestObjectOf(part.rejected, {
        schemaVersion: TRAJECTORY_SCHEMA_VERSION,
        format: 'jsonl.gz',
        kind: 'rejected',
      }),
    );
  }

  const shown: ReviewEntry[] = [];
  async function* reviewEntries() {
    for (const part of parts) {
      const { store, key } = deps.openObject(part.review.uri);
      for await (const entry of readJsonl(store, key, { schema: reviewEntrySchema })) {
        if (shown.length < reportedReviewEntries) shown.push(entry);
        yield entry;
      }
    }
  }
  const review = await writeJsonl(deps.store, deps.output.key(reviewObject), reviewEntries(), {
    schema: reviewEntrySchema,
  });
  objects.push(manifestObjectOf(review, { schemaVersion: REVIEW_SCHEMA_VERSION, format: 'jsonl.gz', kind: 'review' }));

  const { byCategory, total } = mergeCategoryCounts(parts.map((part) => part.stats));
  const startedAt = Math.min(...parts.map((part) => part.startedAt));
  const elapsedMs = Math.max(0, Math.max(...parts.map((part) => part.endedAt)) - startedAt);
  const teacher = parts[0]?.teacher ?? {
    provider: input.teacher.adapter,
    model: String(input.teacher.model ?? input.teacher.adapter),
    simulated: false,
  };
  const stats: CollectStatsDocument = {
    schemaVersion: COLLECT_STATS_SCHEMA_VERSION,
    runId: deps.run.id,
    seed,
    teacher,
    harness: { id: harness.id, version: harness.version, hash: harnessHash(harness) },
    samplesPerTask: input.samplesPerTask,
    selection: input.selection,
    parts: parts.length,
    totals: { ...total, ...deriveFigures(total) },
    byCategory: Object.fromEntries(
      Object.entries(byCategory).map(([category, counts]) => [category, { ...counts, ...deriveFigures(counts) }]),
    ),
    time: {
      partsMs: parts.reduce((sum, part) => sum + (part.endedAt - part.startedAt), 0),
      elapsedMs,
      episodesPerSecond: elapsedMs === 0 ? 0 : Math.round((total.samples / (elapsedMs / 1000)) * 10) / 10,
    },
  };
  const statsInfo = await deps.store.put(deps.output.key(statsObject), `${JSON.stringify(stats, null, 2)}\n`, {
    contentType: 'application/json',
  });
  objects.push(
    manifestObjectOf(statsInfo, { schemaVersion: COLLECT_STATS_SCHEMA_VERSION, format: 'json', kind: 'stats' }),
  );
  const reportInfo = await deps.store.put(
    deps.output.key(reportObject),
    collectReportHtml(stats, { entries: shown, total: review.records }),
    { contentType: 'text/html; charset=utf-8' },
  );
  objects.push(manifestObjectOf(reportInfo, { schemaVersion: 1, format: 'html', kind: 'report' }));

  const summary = {
    tasks: total.tasks,
    samples: total.samples,
    accepted: total.accepted,
    rejected: rejectedTotal(total),
    review: total.review,
    acceptanceRate: stats.totals.acceptanceRate,
  };
  const { info } = await writeStageManifest(deps, {
    objects,
    lineage: { inputs: parts[0]?.lineage ?? [], configHash: hashValue({ ...input, seed }) },
    stats: {
      ...summary,
      meanAcceptedReward: stats.totals.meanAcceptedReward,
      teacher: `${teacher.provider}/${teacher.model}`,
    },
  });
  return {
    manifestUri: info.uri,
    ...summary,
    reviewUri: review.uri,
    statsUri: statsInfo.uri,
    reportUri: reportInfo.uri,
  };
}

export const collectStage = defineStage({
  ...collectContract,
  plan: planCollect,
  createProcessor: createCollectProcessor,
  finish: finishCollect,
});
