/**
 * augment (HSA). Input: trajectories recorded under a canonical harness (gzip JSONL or the
 * collect manifest), the tasks they played, the harness (directory or s3:// prefix), family
 * weights, variants per trajectory, pool size, seed, replay check on/off.
 * Writes, under the stage prefix: `trajectories/part-NNNNN.jsonl.gz` (the kept rewrites, each
 * with the system prompt and tools the model saw under its variant), `variants/<hash>/` (each
 * variant used, stored once: harness files + mapping.json), `relabel.jsonl.gz` (tasks whose
 * recorded reply misses a changed constraint), `stats.json`, `report.html`, then
 * `manifest.json` last.
 * Idempotency: part objects are keyed by part index; variants by content hash; the same input
 * and seed give byte-identical objects, so a retry rewrites the same bytes.
 * Retried: store faults (transient); never: bad config, a missing input, an invalid harness or
 * record (BadInputError).
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { manifestObjectOf, type ManifestObject } from '../../shared/artifacts/manifest';
import { BadInputError } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import { variantToFiles } from '../../shared/harness/hsa/write-variant';
import { VARIANT_MAPPING_SCHEMA_VERSION } from '../../shared/harness/hsa/variant-mapping';
import { TRAJECTORY_SCHEMA_VERSION } from '../../shared/trajectory/trajectory';
import {
  augmentContract,
  relabelEntrySchema,
  type AugmentInput,
  type AugmentOutput,
  type AugmentPartInput,
  type AugmentPartOutput,
} from './augment-contract';
import { expandInputs, isManifestUri } from '../../queues/stage-kit/stage-inputs';
import { augmentEnvironment, augmentPart, partStats, type AugmentSample } from './augment-part';
import { augmentReportHtml } from './augment-report';
import { droppedTotal, mergeStats } from './augment-stats';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';

function seedOf(input: AugmentInput, deps: Pick<StageDeps, 'run'>): string {
  return input.seed ?? deps.run.seed;
}

/** Parts: each input object, split into ranges of `recordsPerPart` when its record count is known (a manifest lists it). */
/** The tasks input: as given, else the manifests among the trajectory inputs (the collect stage lists its tasks there). */
function taskUris(input: AugmentInput): string[] {
  return input.tasks ?? input.trajectories.filter(isManifestUri);
}

export async function planAugment(input: AugmentInput, deps: StageDeps): Promise<AugmentPartInput[]> {
  const tasks = taskUris(input);
  if (input.replayCheck && tasks.length === 0) {
    throw new BadInputError(
      'MISSING_TASKS',
      "augment: the replay check needs the tasks the trajectories played; set tasks (or pass the collect stage's manifest, which lists them) or replayCheck: false",
    );
  }
  // Fail before any part runs when the harness does not load or an input is missing.
  await loadHarnessFromUri(input.harness, deps.openObject);
  if (tasks.length > 0) await expandInputs(tasks, deps.openObject, 'tasks', 'tasks');
  const objects = await expandInputs(input.trajectories, deps.openObject, 'trajectories', 'trajectories');
  const ranges = objects.flatMap((object) => {
    const listed = object.sha256 === undefined ? {} : { sha256: object.sha256 };
    if (object.records === undefined) return [{ uri: object.uri, start: 0, ...listed }];
    const count = Math.max(1, Math.ceil(object.records / input.recordsPerPart));
    return Array.from({ length: count }, (_, index) => ({
      uri: object.uri,
      ...listed,
      start: index * input.recordsPerPart,
      end: Math.max(1, Math.min(object.records as number, (index + 1) * input.recordsPerPart)),
    }));
  });
  return ranges.map((source, index) => ({
    index,
    source,
    tasks,
    harness: input.harness,
    families: input.families,
    variantsPerTrajectory: input.variantsPerTrajectory,
    variantPool: input.variantPool,
    seed: seedOf(input, deps),
    replayCheck: input.replayCheck,
    reportSamples: input.reportSamples,
  }));
}

export function createAugmentProcessor(deps: StageDeps) {
  return (part: AugmentPartInput): Promise<AugmentPartOutput> => augmentPart(part, deps);
}

/** Fans in: stores the variants used, merges the relabel lists, writes stats and the report, then the manifest. */
export async function finishAugment(
  input: AugmentInput,
  parts: AugmentPartOutput[],
  deps: StageDeps,
): Promise<AugmentOutput> {
  const seed = seedOf(input, deps);
  const environment = await augmentEnvironment(
    { harness: input.harness, seed, families: input.families, variantPool: input.variantPool },
    deps.openObject,
  );
  const objects: ManifestObject[] = [];

  for (const part of parts)
    objects.push(
      manifestObjectOf(part.trajectories, {
        schemaVersion: TRAJECTORY_SCHEMA_VERSION,
        format: 'jsonl.gz',
        kind: 'trajectories',
      }),
    );

  const used = new Set(parts.flatMap((part) => part.variantsUsed));
  const variants = environment.pool.variants.filter((variant) => used.has(variant.hash));
  for (const variant of variants) {
    for (const [path, text] of Object.entries(variantToFiles(variant)).sort(([left], [right]) =>
      left < right ? -1 : 1,
    )) {
      const format = path.endsWith('.yaml') ? 'yaml' : path.endsWith('.md') ? 'md' : 'json';
      const info = await deps.store.put(deps.output.key(`variants/${variant.hash}/${path}`), text, {
        contentType: format === 'json' ? 'application/json' : 'text/plain; charset=utf-8',
      });
      objects.push(manifestObjectOf(info, { schemaVersion: VARIANT_MAPPING_SCHEMA_VERSION, format, kind: 'variant' }));
    }
  }

  async function* relabelEntries() {
    for (const part of parts) {
      const { store, key } = deps.openObject(part.relabel.uri);
      yield* readJsonl(store, key, { schema: relabelEntrySchema });
    }
  }
  const relabel = await writeJsonl(deps.store, deps.output.key('relabel.jsonl.gz'), relabelEntries(), {
    schema: relabelEntrySchema,
  });
  objects.push(manifestObjectOf(relabel, { schemaVersion: 1, format: 'jsonl.gz', kind: 'relabel' }));

  const stats = mergeStats(parts.map(partStats));
  const rejectedVariants: Record<string, number> = {};
  for (const entry of environment.pool.rejected)
    rejectedVariants[entry.reason] = (rejectedVariants[entry.reason] ?? 0) + 1;
  const statsDocument = {
    ...stats,
    variants: {
      pool: environment.pool.variants.length,
      used: variants.length,
      rejected: rejectedVariants,
      hashes: variants.map((variant) => ({ hash: variant.hash, families: variant.mapping.families })),
    },
  };
  const statsInfo = await deps.store.put(deps.output.key('stats.json'), `${JSON.stringify(statsDocument, null, 2)}\n`, {
    contentType: 'application/json',
  });
  objects.push(manifestObjectOf(statsInfo, { schemaVersion: 1, format: 'json', kind: 'stats' }));

  const samples: AugmentSample[] = [];
  for (const part of parts) {
    if (samples.length >= input.reportSamples) break;
    const partSamples = JSON.parse((await deps.store.getBuffer(part.samplesKey)).toString('utf8')) as AugmentSample[];
    samples.push(...partSamples.slice(0, input.reportSamples - samples.length));
  }
  const html = augmentReportHtml({
    runId: deps.run.id,
    canonical: environment.canonical,
    canonicalHash: environment.canonicalHash,
    seed,
    replayCheck: input.replayCheck,
    variantsPerTrajectory: input.variantsPerTrajectory,
    stats,
    variants,
    rejectedVariants,
    samples,
  });
  const reportInfo = await deps.store.put(deps.output.key('report.html'), html, {
    contentType: 'text/html; charset=utf-8',
  });
  objects.push(manifestObjectOf(reportInfo, { schemaVersion: 1, format: 'html', kind: 'report' }));

  const inputs = new Map<string, string>();
  for (const part of parts) for (const entry of part.inputs) inputs.set(entry.uri, entry.sha256);
  const { info } = await writeStageManifest(deps, {
    objects,
    lineage: {
      inputs: [...inputs]
        .map(([uri, sha256]) => ({ uri, sha256 }))
        .concat([{ uri: input.harness ?? 'sample:live-host', sha256: environment.canonicalHash }]),
      configHash: hashValue({ ...input, seed }),
    },
    stats: {
      trajectories: stats.pairs.kept,
      dropped: droppedTotal(stats.pairs),
      relabel: stats.relabel,
      variants: variants.length,
      families: stats.families,
    },
  });
  return {
    manifestUri: info.uri,
    trajectories: stats.pairs.kept,
    dropped: droppedTotal(stats.pairs),
    relabel: stats.relabel,
    variants: variants.length,
    checks: stats.checks,
    reportUri: reportInfo.uri,
    statsUri: statsInfo.uri,
  };
}

export const augmentStage = defineStage({
  ...augmentContract,
  plan: planAugment,
  createProcessor: createAugmentProcessor,
  finish: finishAugment,
});
