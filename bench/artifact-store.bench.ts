/**
 * Throughput of gzip JSONL through the artifact store (JsonlWriter/readJsonl: streaming, batched
 * gzip, sha256 while writing, temp file + fsync + rename) against the plain way over the same
 * records in the same run: JSON.stringify + zlib.gzip of the whole buffer + fs.writeFile, and
 * fs.readFile + zlib.gunzip + split + JSON.parse. Both use the same gzip level. Backends: file
 * (temp dir) and s3 (a local s3rver in a child process, so its HTTP handling shows up as cost).
 * Prints records/s and MB/s (uncompressed JSON) for write, read and write+read, and the ratio of
 * the store's write+read throughput to the plain one (goal: >= 0.8 for the file backend).
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/artifact-store.bench.js [--records 20000] [--repeat 3]
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { createArtifactStore } from '../shared/artifacts/create-artifact-store';
import { FileArtifactStore } from '../shared/artifacts/file-artifact-store';
import { readJsonl } from '../shared/artifacts/jsonl-reader';
import { jsonlGzipOptions, writeJsonl } from '../shared/artifacts/jsonl-writer';
import { startLocalS3Server } from '../shared/artifacts/local-s3-server';
import { Rng } from '../shared/random/rng';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags } from './bench-flags';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index === -1 ? undefined : Number(process.argv[index + 1]);
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

const words =
  'coat navy black fog blue size stock coupon price live room host viewer order ship return discount bundle scarf wool cotton limited today'.split(
    ' ',
  );

/** Trajectory-shaped records (~1 KB of JSON each): a repeated system prompt, varied turns, a tool call. */
function makeRecords(count: number): unknown[] {
  const rng = new Rng('artifact-store-bench');
  const sentence = (length: number) => Array.from({ length }, () => rng.pick(words)).join(' ');
  const system = `You are the host of a live-stream sales room. ${sentence(60)}`;
  return Array.from({ length: count }, (_, index) => ({
    schemaVersion: 1,
    id: `trajectory-${index}`,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: sentence(rng.int(5, 25)) },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: `call_${index}`,
            type: 'function',
            function: {
              name: 'sku_stock',
              arguments: JSON.stringify({ itemId: `A${rng.int(1, 500)}`, size: rng.pick(['S', 'M', 'L']) }),
            },
          },
        ],
      },
      {
        role: 'tool',
        tool_call_id: `call_${index}`,
        content: JSON.stringify({ inStock: rng.chance(0.7), units: rng.int(0, 90) }),
      },
      { role: 'assistant', content: sentence(rng.int(10, 40)) },
    ],
    reward: { total: rng.next(), components: { facts: rng.next(), tools: rng.next() } },
    timings: [{ ttftMs: rng.int(50, 900), e2eMs: rng.int(900, 4000) }],
  }));
}

interface Timing {
  writeSeconds: number;
  readSeconds: number;
}

async function timed(work: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** The plain way: whole buffers, one gzip call, one file write / read. */
async function plainRound(directory: string, records: unknown[], round: number): Promise<Timing> {
  const path = join(directory, `plain-${round}.jsonl.gz`);
  const writeSeconds = await timed(async () => {
    const text = records.map((record) => JSON.stringify(record)).join('\n') + '\n';
    await writeFile(path, await gzipAsync(text, jsonlGzipOptions));
  });
  let count = 0;
  const readSeconds = await timed(async () => {
    const text = (await gunzipAsync(await readFile(path))).toString('utf8');
    for (const line of text.split('\n')) {
      if (line !== '') {
        JSON.parse(line);
        count += 1;
      }
    }
  });
  if (count !== records.length) throw new Error(`plain read ${count} of ${records.length} records`);
  return { writeSeconds, readSeconds };
}

async function storeRound(store: ArtifactStore, records: unknown[], round: number): Promise<Timing> {
  const key = `bench/part-${round}.jsonl.gz`;
  const writeSeconds = await timed(async () => {
    await writeJsonl(store, key, records);
  });
  let count = 0;
  const readSeconds = await timed(async () => {
    for await (const record of readJsonl(store, key)) if (record !== undefined) count += 1;
  });
  if (count !== records.length) throw new Error(`store read ${count} of ${records.length} records`);
  return { writeSeconds, readSeconds };
}

function summarize(timings: Timing[]): Timing {
  return {
    writeSeconds: median(timings.map((timing) => timing.writeSeconds)),
    readSeconds: median(timings.map((timing) => timing.readSeconds)),
  };
}

function rates(label: string, seconds: number, records: number, megabytes: number): string {
  return `${label} ${(records / seconds).toFixed(0).padStart(8)} records/s ${(megabytes / seconds).toFixed(1).padStart(7)} MB/s`;
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/artifact-store.bench.js [--records 20000] [--repeat 3]');
  const recordCount = argument('records', 20_000);
  const repeat = argument('repeat', 3);
  const records = makeRecords(recordCount);
  const megabytes =
    records.reduce<number>((sum, record) => sum + Buffer.byteLength(JSON.stringify(record)) + 1, 0) / 1e6;
  const directory = await mkdtemp(join(tmpdir(), 'hat-artifact-bench-'));
  const server = await startLocalS3Server({ bucket: 'bench' });
  const fileStore = new FileArtifactStore(join(directory, 'store'));
  const s3Store = createArtifactStore('s3://bench/run', server.env);
  const results = new Map<string, Timing[]>([
    ['plain', []],
    ['file', []],
    ['s3', []],
  ]);
  try {
    // One warm-up round each (JIT, sockets), then interleaved rounds so load drift hits all alike.
    await plainRound(directory, records, -1);
    await storeRound(fileStore, records, -1);
    await storeRound(s3Store, records, -1);
    for (let round = 0; round < repeat; round++) {
      results.get('plain')!.push(await plainRound(directory, records, round));
      results.get('file')!.push(await storeRound(fileStore, records, round));
      results.get('s3')!.push(await storeRound(s3Store, records, round));
    }
  } finally {
    await s3Store.close();
    await server.stop();
    await rm(directory, { recursive: true, force: true });
  }

  const plain = summarize(results.get('plain')!);
  const plainTotal = plain.writeSeconds + plain.readSeconds;
  console.log(
    `artifact store gzip JSONL: ${recordCount} records, ${megabytes.toFixed(1)} MB of JSON, median of ${repeat} rounds, gzip level ${jsonlGzipOptions.level}`,
  );
  for (const name of ['plain', 'file', 's3']) {
    const timing = summarize(results.get(name)!);
    const total = timing.writeSeconds + timing.readSeconds;
    console.log(
      `  ${name.padEnd(5)}  ${rates('write', timing.writeSeconds, recordCount, megabytes)}  ${rates('read', timing.readSeconds, recordCount, megabytes)}  ${rates('write+read', total, recordCount, megabytes)}`,
    );
    if (name !== 'plain')
      console.log(
        `         ratio to plain (write+read throughput): ${(plainTotal / total).toFixed(2)}  (write ${(plain.writeSeconds / timing.writeSeconds).toFixed(2)}, read ${(plain.readSeconds / timing.readSeconds).toFixed(2)})`,
      );
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
