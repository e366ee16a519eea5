/**
 * hash-demo (example CPU-heavy stage). Input: parts and sha256 rounds. Writes
 * `<stage prefix>/digests.jsonl.gz` and `manifest.json` last (in finish). Parts write nothing, so
 * retries are free. Retried: any error (none are expected).
 */
import { createHash } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { defineStage, type StageDeps } from '../../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../../queues/stage-kit/stage-manifest';
import {
  hashDemoContract,
  type HashDemoInput,
  type HashDemoOutput,
  type HashDemoPartInput,
  type HashDemoPartOutput,
} from './contract';
import { writeJsonl } from '../../../shared/artifacts/jsonl-writer';
import { manifestObjectOf } from '../../../shared/artifacts/manifest';
import { hashValue } from '../../../shared/hash/hash';

export function planHashDemo(input: HashDemoInput): HashDemoPartInput[] {
  return Array.from({ length: input.parts }, (_, index) => ({ index, rounds: input.rounds }));
}

export function createHashDemoProcessor(deps: StageDeps) {
  return async (part: HashDemoPartInput): Promise<HashDemoPartOutput> => {
    // Deliberately synchronous: this is the event-loop-blocking work the sandbox exists for.
    let digest = Buffer.from(`${deps.run.seed}/${part.index}`);
    for (let round = 0; round < part.rounds; round++) digest = createHash('sha256').update(digest).digest();
    return { index: part.index, digest: digest.toString('hex'), threadId };
  };
}

export async function finishHashDemo(
  input: HashDemoInput,
  parts: HashDemoPartOutput[],
  deps: StageDeps,
): Promise<HashDemoOutput> {
  const written = await writeJsonl(
    deps.store,
    deps.output.key('digests.jsonl.gz'),
    parts.map((part) => ({ index: part.index, digest: part.digest })),
  );
  const { info } = await writeStageManifest(deps, {
    objects: [manifestObjectOf(written, { schemaVersion: 1, format: 'jsonl.gz' })],
    lineage: { inputs: [], configHash: hashValue(input) },
    stats: { parts: parts.length, rounds: input.rounds },
  });
  return { manifestUri: info.uri, parts: parts.length };
}

export const hashDemoStage = defineStage({
  ...hashDemoContract,
  plan: planHashDemo,
  createProcessor: createHashDemoProcessor,
  finish: finishHashDemo,
});
