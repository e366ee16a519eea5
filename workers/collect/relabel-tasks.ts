import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { expandInputs, readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { BadInputError } from '../../shared/errors';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import { relabelEntrySchema } from '../../shared/trajectory/relabel-entry';
import { asArtifactUri } from '../../shared/artifacts/artifact-uri';

/** The tasks of augment's relabel list that name one variant, with that variant's harness. */
export interface RelabelGroup {
  variantHash: string;
  /** `<augment output>/variants/<variantHash>`, where augment stored the variant's files. */
  harnessUri: string;
  harness: Harness;
  /** Content hash of the loaded variant harness (what the part checks it against). */
  hash: string;
  /** HSA families of the variant, when its harness records them. */
  families?: string[];
  /** In the order of the given tasks, each once. */
  tasks: Task[];
}

export interface RelabelPlan {
  groups: RelabelGroup[];
  /** The relabel lists and variant harnesses read, with their hashes. */
  lineage: Array<{ uri: string; sha256: string }>;
}

/**
 * Reads augment's relabel list (its stage manifest or `relabel.jsonl.gz`) and groups the listed
 * tasks by variant, loading each variant's harness from `variants/<hash>/` beside the list. Every
 * entry must name a task among `tasks`; a (task, variant) listed twice is played once.
 */
export async function loadRelabelPlan(
  uri: string,
  tasks: readonly Task[],
  openObject: StageDeps['openObject'],
): Promise<RelabelPlan> {
  const objects = await expandInputs([asArtifactUri(uri)], openObject, 'collect.relabel', 'relabel');
  const known = new Set(tasks.map((task) => task.id));
  const wanted = new Map<string, { harnessUri: string; taskIds: Set<string> }>();
  const lineage: RelabelPlan['lineage'] = [];
  for (const object of objects) {
    const { records, sha256 } = await readRecordRange(openObject, object.uri, relabelEntrySchema);
    lineage.push({ uri: object.uri, sha256 });
    const variantsRoot = `${object.uri.slice(0, object.uri.lastIndexOf('/'))}/variants`;
    for (const [index, entry] of records.entries()) {
      if (!known.has(entry.taskId)) {
        throw new BadInputError(
          'UNKNOWN_TASK',
          `${object.uri}: record ${index + 1}: taskId: task "${entry.taskId}" is not among collect's tasks; give the task set the augmented trajectories played (e.g. tasks: <the first collect's manifest.json>)`,
        );
      }
      if (!/^[0-9a-f]{16,64}$/.test(entry.variantHash)) {
        throw new BadInputError(
          'BAD_RELABEL_ENTRY',
          `${object.uri}: record ${index + 1}: variantHash: "${entry.variantHash}" is not a variant hash; the list must come from the augment stage`,
        );
      }
      const group = wanted.get(entry.variantHash) ?? {
        harnessUri: `${variantsRoot}/${entry.variantHash}`,
        taskIds: new Set<string>(),
      };
      group.taskIds.add(entry.taskId);
      wanted.set(entry.variantHash, group);
    }
  }
  const groups: RelabelGroup[] = [];
  for (const [variantHash, group] of [...wanted].sort(([left], [right]) => (left < right ? -1 : 1))) {
    const harness = await loadVariantHarness(group.harnessUri, variantHash, openObject);
    const hash = harnessHash(harness);
    const families = familiesOf(harness);
    lineage.push({ uri: group.harnessUri, sha256: hash });
    groups.push({
      variantHash,
      harnessUri: group.harnessUri,
      harness,
      hash,
      ...(families ? { families } : {}),
      tasks: tasks.filter((task) => group.taskIds.has(task.id)),
    });
  }
  return { groups, lineage };
}

async function loadVariantHarness(
  uri: string,
  variantHash: string,
  openObject: StageDeps['openObject'],
): Promise<Harness> {
  try {
    return await loadHarnessFromUri(uri, openObject);
  } catch (error) {
    if (!(error instanceof BadInputError) && (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    throw new BadInputError(
      'MISSING_VARIANT',
      `collect.relabel: variant ${variantHash} cannot be loaded from ${uri} (${(error as Error).message}); augment stores every variant its relabel list names under variants/<hash>/ beside the list: point relabel at an augment output`,
      { cause: error },
    );
  }
}

/** The HSA families a variant harness records in its metadata (`meta.hsa.families`). */
function familiesOf(harness: Harness): string[] | undefined {
  const families = (harness.meta?.hsa as { families?: unknown } | undefined)?.families;
  return Array.isArray(families) && families.every((family) => typeof family === 'string') ? families : undefined;
}
