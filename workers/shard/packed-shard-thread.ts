/**
 * The thread PackedShardEncoder encodes packed shards on: it reads the samples' ids from the
 * parts' token files the fan-in opened (workerData) and answers each request with the shard's
 * Parquet bytes (moved back, not copied).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ColumnBuffers, encodePackedShard, type PackedShardRequest, type PackingThreadData } from './packed-shard';
import { TokenFileReader } from './token-files';

const tokens = new TokenFileReader((workerData as PackingThreadData).tokenFiles);
const buffers = new ColumnBuffers();

parentPort?.on('message', (message: { id: number; request: PackedShardRequest }) => {
  try {
    const shard = encodePackedShard(message.request, tokens, buffers);
    const owned = shard.bytes.byteOffset === 0 && shard.bytes.byteLength === shard.bytes.buffer.byteLength;
    const bytes = owned ? shard.bytes : shard.bytes.slice();
    parentPort!.postMessage({ id: message.id, shard: { ...shard, bytes } }, [bytes.buffer as ArrayBuffer]);
  } catch (error) {
    parentPort!.postMessage({ id: message.id, error: (error as Error).message });
  }
});
