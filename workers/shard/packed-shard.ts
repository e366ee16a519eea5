import { Worker } from 'node:worker_threads';
import { compiledEntryFile } from '../../shared/config/compiled-entry';
import { encodeParquetColumns, type ParquetColumn } from '../../shared/artifacts/parquet-codec';
import { HatError } from '../../shared/errors';
import { writeSequence, type PackedSample } from './pack-sequences';
import { TokenFileReader, type TokenFile } from './token-files';

/** Packed sequences per Parquet row group: small enough that a reader streams, large enough to compress. */
const rowGroupSequences = 64;

export const packedColumns: ParquetColumn[] = [
  { name: 'input_ids', type: { list: 'INT32' } },
  { name: 'labels', type: { list: 'INT32' } },
  { name: 'loss_mask', type: { list: 'INT32' } },
  { name: 'position_ids', type: { list: 'INT32' } },
  { name: 'cu_seqlens', type: { list: 'INT32' } },
  { name: 'source_ids', type: { list: 'STRING' } },
  { name: 'folded_hook_messages', type: { list: 'INT32' } },
  { name: 'num_samples', type: 'INT32' },
  { name: 'num_tokens', type: 'INT32' },
  { name: 'num_trained', type: 'INT32' },
];

/** One sample placed in a packed sequence: where its ids are (part, offset, count) and what is trained. */
export interface PlacedSample {
  part: number;
  offset: number;
  count: number;
  spans: ReadonlyArray<readonly [number, number]>;
  sourceId: string;
  /** Hook system messages the rendering folded (0: none), per sample beside source_ids. */
  foldedHookMessages?: number;
}

/** One packed Parquet shard to encode: its sequences (each a list of samples) and the file's settings. */
export interface PackedShardRequest {
  sequences: PlacedSample[][];
  sequenceLength: number;
  padTokenId: number;
  metadata: Record<string, string>;
}

export interface PackedShard {
  bytes: Uint8Array;
  /** Non-padding and trained tokens over the shard's sequences. */
  tokens: number;
  trainedTokens: number;
}

/** Column buffers reused from shard to shard (writeSequence writes every position of every row). */
export class ColumnBuffers {
  private buffers = this.make(0);
  private sequenceIds = new Int32Array(0);

  /** Room for one sequence's sample ids, read from the token files (a sequence's samples fit its length). */
  idsOf(length: number): Int32Array {
    if (this.sequenceIds.length < length) this.sequenceIds = new Int32Array(length);
    return this.sequenceIds;
  }

  private make(length: number) {
    return {
      inputIds: new Int32Array(length),
      labels: new Int32Array(length),
      lossMask: new Int32Array(length),
      positionIds: new Int32Array(length),
    };
  }

  of(length: number) {
    if (this.buffers.inputIds.length < length) this.buffers = this.make(length);
    const { inputIds, labels, lossMask, positionIds } = this.buffers;
    return {
      inputIds: inputIds.subarray(0, length),
      labels: labels.subarray(0, length),
      lossMask: lossMask.subarray(0, length),
      positionIds: positionIds.subarray(0, length),
    };
  }
}

/** Writes the shard's sequences into flat columns and encodes them as one Parquet file. */
export function encodePackedShard(
  request: PackedShardRequest,
  tokens: TokenFileReader,
  buffers: ColumnBuffers,
): PackedShard {
  const { sequences, sequenceLength, padTokenId } = request;
  const columns = buffers.of(sequences.length * sequenceLength);
  const sequenceIds = buffers.idsOf(sequenceLength);
  const cuSeqlens: number[][] = [];
  const sourceIds: string[][] = [];
  const foldedHooks: number[][] = [];
  const counts = { samples: [] as number[], tokens: [] as number[], trained: [] as number[] };
  let tokenTotal = 0;
  let trainedTotal = 0;
  for (const [row, placed] of sequences.entries()) {
    let filled = 0;
    const samples: PackedSample[] = placed.map((sample) => {
      if (filled + sample.count > sequenceLength)
        throw new HatError('PACKING_FAILED', `a packed sequence holds more than ${sequenceLength} tokens`);
      const ids = tokens.read(sample.part, sample.offset, sample.count, sequenceIds.subarray(filled));
      filled += sample.count;
      return { ids, spans: sample.spans, sourceId: sample.sourceId };
    });
    const sequence = writeSequence(samples, sequenceLength, padTokenId, columns, row * sequenceLength);
    cuSeqlens.push(sequence.cuSeqlens);
    sourceIds.push(sequence.sourceIds);
    foldedHooks.push(placed.map((sample) => sample.foldedHookMessages ?? 0));
    counts.samples.push(samples.length);
    counts.tokens.push(sequence.tokens);
    counts.trained.push(sequence.trainedTokens);
    tokenTotal += sequence.tokens;
    trainedTotal += sequence.trainedTokens;
  }
  const lengths = new Array<number>(sequences.length).fill(sequenceLength);
  const bytes = encodeParquetColumns(
    packedColumns,
    {
      input_ids: { values: columns.inputIds, lengths },
      labels: { values: columns.labels, lengths },
      loss_mask: { values: columns.lossMask, lengths },
      position_ids: { values: columns.positionIds, lengths },
      cu_seqlens: cuSeqlens,
      source_ids: sourceIds,
      folded_hook_messages: foldedHooks,
      num_samples: counts.samples,
      num_tokens: counts.tokens,
      num_trained: counts.trained,
    },
    { metadata: request.metadata, rowGroupSize: rowGroupSequences },
  );
  return { bytes, tokens: tokenTotal, trainedTokens: trainedTotal };
}

type Reply = { id: number; shard?: PackedShard; error?: string };

/** What the packing thread starts with: the parts' token files (descriptors of this process). */
export interface PackingThreadData {
  tokenFiles: TokenFile[];
}

/**
 * Encodes packed shards on a worker thread of its own when the compiled entry is there, so the
 * fan-in's other core packs while this one writes the JSONL exports (both are most of the fan-in),
 * and in this thread otherwise. Either way the samples' ids are read from the parts' token files
 * a sequence at a time (token-files.ts). Shards come back in the order asked for; the same inputs
 * give the same bytes either way (the same function encodes them).
 */
export class PackedShardEncoder {
  private readonly worker?: Worker;
  private readonly waiting = new Map<number, { resolve(shard: PackedShard): void; reject(error: Error): void }>();
  private readonly local: { tokens: TokenFileReader; buffers: ColumnBuffers };
  private next = 0;
  private failure?: Error;

  constructor(tokenFiles: TokenFile[], useThread = true) {
    this.local = { tokens: new TokenFileReader(tokenFiles), buffers: new ColumnBuffers() };
    const entry = useThread ? compiledEntryFile('workers/shard/packed-shard-thread') : undefined;
    if (!entry) return;
    const workerData: PackingThreadData = { tokenFiles };
    this.worker = new Worker(entry, { workerData });
    this.worker.on('message', (reply: Reply) => {
      const waiter = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (reply.shard) waiter?.resolve(reply.shard);
      else
        waiter?.reject(new HatError('PACKING_FAILED', `packing a shard failed: ${reply.error}`, { retryable: true }));
    });
    this.worker.on('error', (error) => this.fail(error));
    this.worker.on('exit', (code) => {
      if (code !== 0) this.fail(new Error(`the packing thread exited with code ${code}`));
    });
  }

  /** Whether shards are encoded on a thread of their own. */
  get threaded(): boolean {
    return this.worker !== undefined;
  }

  encode(request: PackedShardRequest): Promise<PackedShard> {
    if (!this.worker) {
      try {
        return Promise.resolve(encodePackedShard(request, this.local.tokens, this.local.buffers));
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    }
    if (this.failure) return Promise.reject(this.failure);
    const id = this.next++;
    return new Promise<PackedShard>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker!.postMessage({ id, request });
    });
  }

  /** Stops the thread; the token files stay open (their owner closes them). */
  async close(): Promise<void> {
    if (this.worker) await this.worker.terminate();
  }

  private fail(error: Error): void {
    this.failure = new HatError('PACKING_FAILED', `the packing thread failed: ${error.message}`, {
      retryable: true,
      cause: error,
    });
    for (const waiter of this.waiting.values()) waiter.reject(this.failure);
    this.waiting.clear();
  }
}
