/**
 * Eval client overhead per item: the eval stage answering single-prompt items through its model
 * client, against a bare node:http loop sending the same prompts to the same server at the same
 * concurrency. Both in this process; the local OpenAI-compatible test server runs in a child
 * process (so the two event loops do not share one queue) and streams a fixed 24-chunk answer.
 *
 * Stage path: `runStageLocally(eval)` on an in-memory store with a `custom` suite built from the
 * IFEval prompt texts and one cheap rule check each (punctuation:no_comma), so what is measured
 * is the eval's own work per item (item plan, client, result record, JSONL, scores), not the
 * checkers; a second stage run on the `ifeval` suite adds the 25 reference checkers (reported,
 * not part of the goal).
 *
 * Ratio = median bare wall time / median stage wall time over alternating rounds (1 = no overhead; goal ≥ 0.9), measured twice: with a
 * served-model-like pace (first chunk after 20 ms, then 2 ms per chunk) and with zero delay
 * (pure overhead, the worst case). Prints figures, never asserts on time.
 *
 *   npx tsc -p tsconfig.build.json && node dist/bench/eval-client.bench.js [--items 541] [--concurrency 16] [--rounds 5]
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { runStageLocally } from '../queues/stage-kit/run-stage-locally';
import { MemoryArtifactStore } from '../shared/artifacts/memory-artifact-store';
import { loadIfevalItems } from '../shared/eval/ifeval';
import { silentLogger } from '../shared/log/logger';
import { OpenAiTestServer, type StreamTiming } from '../shared/models/testing/openai-test-server';
import { registerCatalogStages } from '../workers/stage-catalog';
import { evalStage } from '../workers/eval/processor';

const answer = 'Thank you for asking. The jacket is lined with down and ships today. Returns are free for thirty days and the coupon applies at checkout.';

function median(values: number[]): number {
  const sorted = [...values].sort((left, right) => left - right);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function flag(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

async function serve(): Promise<void> {
  const timing = JSON.parse(process.argv[3] ?? '{}') as StreamTiming;
  const server = await OpenAiTestServer.start({ responder: () => ({ content: answer, contentPieceChars: 6 }), timing });
  process.send?.({ url: server.url });
  process.on('message', () => {
    void server.close().then(() => process.exit(0));
  });
}

async function startServer(timing: StreamTiming): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(__filename, ['--serve', JSON.stringify(timing)], { stdio: 'inherit' });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`test server exited with ${code}`)));
  });
  return { child, url };
}

/** The baseline: bare node:http streaming POSTs of the same prompts, reading the bytes only. */
async function bareLoop(url: string, prompts: string[], concurrency: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const target = new URL(`${url}/v1/chat/completions`);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < prompts.length) {
        const prompt = prompts[next++] as string;
        const body = Buffer.from(JSON.stringify({ model: 'test-model', messages: [{ role: 'user', content: prompt }], temperature: 0, stream: true, stream_options: { include_usage: true } }));
        await new Promise<void>((resolve, reject) => {
          const outgoing = http.request(target, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (response) => {
            response.on('data', () => undefined);
            response.on('end', () => resolve());
            response.on('error', reject);
          });
          outgoing.on('error', reject);
          outgoing.end(body);
        });
      }
    }),
  );
  agent.destroy();
  return performance.now() - started;
}

/** One eval stage run on an in-memory store (the custom prompt file in it), ms. */
async function stageRun(url: string, prompts: string[], suite: 'custom' | 'ifeval', concurrency: number): Promise<number> {
  const store = new MemoryArtifactStore('bench');
  await store.put('custom.jsonl', prompts.map((prompt, index) => JSON.stringify({ id: `p-${index}`, prompt, checks: [{ instruction: 'punctuation:no_comma' }] })).join('\n') + '\n');
  const suites = suite === 'custom' ? { custom: { prompts: store.uriOf('custom.jsonl') } } : { ifeval: { size: prompts.length } };
  const started = performance.now();
  await runStageLocally(
    evalStage,
    {
      models: [{ label: 'served', model: { adapter: 'openai', baseUrl: `${url}/v1`, model: 'test-model', maxRetries: 0, concurrency } }],
      suites,
      itemsPerPart: prompts.length,
      itemConcurrency: concurrency,
    },
    { store, outputPrefix: 'out/', openObject: (uri) => ({ store, key: store.keyOf(uri) }), logger: silentLogger(), seed: 'bench', concurrency: 1 },
  );
  return performance.now() - started;
}

async function main(): Promise<void> {
  registerCatalogStages();
  const items = flag('--items', 541);
  const concurrency = flag('--concurrency', 16);
  const rounds = flag('--rounds', 5);
  const prompts = loadIfevalItems()
    .slice(0, items)
    .map((item) => item.prompt);
  const results: Record<string, unknown> = {};
  console.log(`eval client overhead: ${prompts.length} items, ${concurrency} at once, medians of ${rounds} alternating rounds, test server in a child process`);
  for (const [name, timing] of [
    ['paced (20 ms first chunk, 2 ms per chunk)', { ttftMs: 20, tokenDelayMs: 2 }],
    ['zero delay (pure overhead)', {}],
  ] as Array<[string, StreamTiming]>) {
    const { child, url } = await startServer(timing);
    try {
      // Warm both paths once (connections, JIT, IFEval data).
      await bareLoop(url, prompts.slice(0, 32), concurrency);
      await stageRun(url, prompts, 'custom', concurrency);
      // Alternating rounds, medians: the machine's load moves both paths between rounds.
      const bares: number[] = [];
      const customs: number[] = [];
      const ifevals: number[] = [];
      for (let round = 0; round < rounds; round++) {
        bares.push(await bareLoop(url, prompts, concurrency));
        customs.push(await stageRun(url, prompts, 'custom', concurrency));
        ifevals.push(await stageRun(url, prompts, 'ifeval', concurrency));
      }
      const baseline = median(bares);
      const custom = median(customs);
      const ifeval = median(ifevals);
      const row = {
        bareMsPerItem: baseline / prompts.length,
        stageMsPerItem: custom / prompts.length,
        overheadMsPerItem: (custom - baseline) / prompts.length,
        ratio: baseline / custom,
        withIfevalCheckersMsPerItem: ifeval / prompts.length,
        ratioWithIfevalCheckers: baseline / ifeval,
      };
      results[name] = row;
      console.log(
        `${name}: bare ${row.bareMsPerItem.toFixed(3)} ms/item, eval stage ${row.stageMsPerItem.toFixed(3)} ms/item ` +
          `(+${row.overheadMsPerItem.toFixed(3)} ms), ratio ${row.ratio.toFixed(3)} (goal >= 0.9); with the IFEval checkers ${row.withIfevalCheckersMsPerItem.toFixed(3)} ms/item, ratio ${row.ratioWithIfevalCheckers.toFixed(3)}`,
      );
    } finally {
      child.send('stop');
    }
  }
  console.log(JSON.stringify({ benchmark: 'eval-client', items: prompts.length, concurrency, rounds, ...results }));
}

if (require.main === module) {
  if (process.argv[2] === '--serve') void serve();
  else
    main().catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
