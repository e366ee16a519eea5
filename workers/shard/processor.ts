/**
 * shard: SFT data for the target model. Input: trajectory sets (gzip JSONL or stage manifests)
 * with mixing weights, the target tokenizer and chat template, packing and split settings
 * (workers/shard/shard-contract.ts).
 * Writes under the stage prefix: `<split>/packed-NNNNN.parquet` (tokenized, loss-masked, packed
 * sequences), `<split>/{openai,ms-swift,llama-factory}.jsonl.gz`, `<split>/verl-NNNNN.parquet`,
 * `llama-factory/dataset_info.json`, `README.md` (dataset card), `stats.json`, and
 * `manifest.json` last; parts leave scratch files under `_parts/`.
 * Idempotency: a part's files are keyed by its index and rewritten whole on retry; the fan-in
 * returns the existing output when the manifest is complete for the same parts and config, and
 * otherwise rewrites the same bytes for the same input and seed.
 * Retried: store faults. Never: bad input (unreadable or invalid records, missing inputs or
 * template), a tokenizer that changed between parts, a segmented-encoding mismatch.
 */
import { createGunzip } from 'node:zlib';
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { isGzipKey } from '../../shared/artifacts/jsonl-reader';
import { BadInputError } from '../../shared/errors';
import { expandInputs } from '../../queues/stage-kit/stage-inputs';
import { exportFormats, shardContract, type ShardInput, type ShardPartInput } from './shard-contract';
import { finishShard, shardFanInTasks } from './shard-finish';
import { processShardPart } from './shard-part';
import { shardInputSets, shardTextSettings } from './shard-settings';

/** Records (non-blank lines) of a JSONL object a manifest does not describe, counted by streaming it once. */
async function countRecords(openObject: StageDeps['openObject'], uri: string): Promise<number> {
  const { store, key } = openObject(uri);
  const source = await store.getStream(key);
  const stream = isGzipKey(key) ? source.pipe(createGunzip()) : source;
  let records = 0;
  let blank = true;
  try {
    for await (const chunk of stream) {
      for (const byte of chunk as Buffer) {
        if (byte === 0x0a) {
          if (!blank) records++;
          blank = true;
        } else if (blank && byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) blank = false;
      }
    }
  } catch (error) {
    throw new BadInputError('BAD_JSONL', `${uri}: not readable (${(error as Error).message}); is it gzip JSONL?`, {
      cause: error,
    });
  }
  return blank ? records : records + 1;
}

/** One part per `recordsPerPart` records of each input object, in input order. */
export async function planShard(input: ShardInput, deps: StageDeps): Promise<ShardPartInput[]> {
  const text = await shardTextSettings(input, deps);
  const exportBodies = exportFormats.filter(
    (format) => input.formats.includes(format) || (format === 'openai' && input.verlParquet),
  );
  const parts: ShardPartInput[] = [];
  for (const [inputIndex, set] of shardInputSets(input).entries()) {
    const objects = await expandInputs(set.uris, deps.openObject, `inputs[${inputIndex}].uri`, 'trajectories');
    for (const object of objects) {
      const records = object.records ?? (await countRecords(deps.openObject, object.uri));
      for (let start = 0; start < records; start += input.recordsPerPart) {
        parts.push({
          index: parts.length,
          inputIndex,
          source: {
            uri: object.uri,
            start,
            end: Math.min(records, start + input.recordsPerPart),
            ...(object.sha256 === undefined ? {} : { sha256: object.sha256 }),
          },
          text,
          exportBodies,
        });
      }
    }
  }
  if (parts.length === 0)
    throw new BadInputError(
      'NO_RECORDS',
      'the shard inputs hold no records; point inputs at trajectories (gzip JSONL or a stage manifest listing them)',
    );
  return parts;
}

export const shardStage = defineStage({
  ...shardContract,
  plan: planShard,
  createProcessor: (deps: StageDeps) => (part: ShardPartInput) => processShardPart(part, deps),
  finish: finishShard,
  fanInTasks: shardFanInTasks,
});
