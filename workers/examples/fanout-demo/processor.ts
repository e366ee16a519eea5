/**
 * fanout-demo (example stage). Input: part count, records per part, simulated delay, faults.
 * Writes `<stage prefix>/part-NNNNN.jsonl.gz` per part (seeded records) and `manifest.json` last.
 * Idempotency: a part's object key comes from its index; a retry rewrites only that object.
 * Retried: the injected TransientError; never: the injected BadInputError (writes nothing).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { defineStage, type StageDeps } from '../../../queues/stage-kit/define-stage';
import { writeStageManifest } from '../../../queues/stage-kit/stage-manifest';
import {
  fanoutDemoContract,
  type FanoutDemoInput,
  type FanoutDemoOutput,
  type FanoutDemoPartInput,
  type FanoutDemoPartOutput,
} from './contract';
import { writeJsonl } from '../../../shared/artifacts/jsonl-writer';
import { BadInputError, TransientError } from '../../../shared/errors';
import { hashValue } from '../../../shared/hash/hash';

export const fanoutDemoRecordSchemaVersion = 1;

export function planFanoutDemo(input: FanoutDemoInput): FanoutDemoPartInput[] {
  const transient = new Set(input.faults.transientOnFirstAttempt);
  const bad = new Set(input.faults.badInput);
  return Array.from({ length: input.parts }, (_, index) => ({
    index,
    records: input.recordsPerPart,
    delayMs: input.partDelayMs,
    fault: bad.has(index) ? 'bad-input' : transient.has(index) ? 'transient-once' : 'none',
  }));
}

export function createFanoutDemoProcessor(deps: StageDeps) {
  return async (part: FanoutDemoPartInput): Promise<FanoutDemoPartOutput> => {
    if (part.fault === 'bad-input') {
      throw new BadInputError(
        'DEMO_BAD_PART',
        `part ${part.index} of ${deps.stage} has input marked bad (faults.badInput); remove it from the config`,
      );
    }
    if (part.delayMs > 0) await sleep(part.delayMs, undefined, { signal: deps.signal });
    if (part.fault === 'transient-once' && deps.attempt === 1) {
      throw new TransientError(
        'DEMO_TRANSIENT',
        `part ${part.index} of ${deps.stage} failed on its first attempt (faults.transientOnFirstAttempt)`,
      );
    }
    const records = Array.from({ length: part.records }, (_, index) => ({
      part: part.index,
      index,
      value: deps.rng.int(0, 1_000_000),
      text: `record ${index} of part ${part.index}`,
    }));
    const key = deps.output.key(`${deps.part?.id ?? `part-${part.index}`}.jsonl.gz`);
    const written = await writeJsonl(deps.store, key, records);
    deps.progress({ done: part.records, total: part.records });
    return {
      key: written.key,
      uri: written.uri,
      records: written.records,
      bytes: written.bytes,
      sha256: written.sha256,
    };
  };
}

export async function finishFanoutDemo(
  input: FanoutDemoInput,
  parts: FanoutDemoPartOutput[],
  deps: StageDeps,
): Promise<FanoutDemoOutput> {
  const records = parts.reduce((sum, part) => sum + part.records, 0);
  const { info } = await writeStageManifest(deps, {
    objects: parts.map((part) => ({
      key: part.key,
      uri: part.uri,
      sha256: part.sha256,
      bytes: part.bytes,
      records: part.records,
      schemaVersion: fanoutDemoRecordSchemaVersion,
      format: 'jsonl.gz',
    })),
    lineage: { inputs: [], configHash: hashValue(input) },
    stats: { parts: parts.length, records },
  });
  return { manifestUri: info.uri, parts: parts.length, records };
}

export const fanoutDemoStage = defineStage({
  ...fanoutDemoContract,
  plan: planFanoutDemo,
  createProcessor: createFanoutDemoProcessor,
  finish: finishFanoutDemo,
});
