/**
 * The thread PackedShardEncoder encodes packed shards on: it holds every part's token ids and
 * answers each `encode` with the shard's Parquet bytes (moved back, not copied).
 */
import { parentPort } from 'node:worker_threads';
import { ColumnBuffers, encodePackedShard, type PackedShardRequest } from './packed-shard';

const tokens: Int32Array[] = [];
const buffers = new ColumnBuffers();

type Message =
  { type: 'tokens'; part: number; ids: Int32Array } | { type: 'encode'; id: number; request: PackedShardRequest };

parentPort?.on('message', (message: Message) => {
  if (message.type === 'tokens') {
    tokens[message.part] = message.ids;
    return;
  }
  try {
    const shard = encodePackedShard(message.request, tokens, buffers);
    const owned = shard.bytes.byteOffset === 0 && shard.bytes.byteLength === shard.bytes.buffer.byteLength;
    const bytes = owned ? shard.bytes : shard.bytes.slice();
    parentPort!.postMessage({ id: message.id, shard: { ...shard, bytes } }, [bytes.buffer as ArrayBuffer]);
  } catch (error) {
    parentPort!.postMessage({ id: message.id, error: (error as Error).message });
  }
});
