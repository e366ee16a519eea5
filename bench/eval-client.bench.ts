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
 * Ratio = bare wall time / stage wall time, per round (the two runs back to back, their order
 * alternating between rounds), and the median of the rounds' ratios (1 = no overhead; goal ≥ 0.9),
 * measured twice: with a served-model-like pace (first chunk after 20 ms, then 2 ms per chunk)
 * and with zero delay (pure overhead, the worst case). Also this process's CPU per item on each
 * side (steadier than wall time on a shared machine). Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/eval-client.bench.js [--items 541] [--concurrency 16] [--rounds 7]
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
import { registerModelAdapters } from '../workers/register-model-adapters';
import { median } from '../shared/metrics/percentile';
import { checkBenchFlags, endsWithThisProcess } from './bench-flags';

registerModelAdapters();

const answer =
  'Thank you for asking. The jacket is lined with down and ships today. Returns are free for thirty days and the coupon applies at checkout.';

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
  const child = endsWithThisProcess(fork(__filename, ['--serve', JSON.stringify(timing)], { stdio: 'inherit' }));
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
        const prompt = prompts[next++];
        const body = Buffer.from(
          JSON.stringify({
            model: 'test-model',
            messages: [{ role: 'user', content: prompt }],
            temperature: 0,
            stream: true,
            stream_options: { include_usage: true },
          }),
        );
        await new Promise<void>((resolve, reject) => {
          const outgoing = http.request(
            target,
            { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
            (response) => {
              response.on('data', () => undefined);
              response.on('end', () => resolve());
              response.on('error', reject);
            },
          );
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
async function stageRun(
  url: string,
  prompts: string[],
  suite: 'custom' | 'ifeval',
  concurrency: number,
): Promise<number> {
  const store = new MemoryArtifactStore('bench');
  await store.put(
    'custom.jsonl',
    prompts
      .map((prompt, index) =>
        JSON.stringify({ id: `p-${index}`, prompt, checks: [{ instruction: 'punctuation:no_comma' }] }),
      )
      .join('\n') + '\n',
  );
  const suites =
    suite === 'custom' ? { custom: { prompts: store.uriOf('custom.jsonl') } } : { ifeval: { size: prompts.length } };
  const started = performance.now();
  await runStageLocally(
    evalStage,
    {
      models: [
        {
          label: 'served',
          model: { adapter: 'openai', baseUrl: `${url}/v1`, model: 'test-model', maxRetries: 0, concurrency },
        },
      ],
      suites,
      itemsPerPart: prompts.length,
      itemConcurrency: concurrency,
    },
    {
      store,
      outputPrefix: 'out/',
      openObject: (uri) => ({ store, key: store.keyOf(uri) }),
      logger: silentLogger(),
      seed: 'bench',
      concurrency: 1,
    },
  );
  return performance.now() - started;
}

/** Wall ms and this process's CPU ms (user + system) of one measured run. */
async function measured(run: () => Promise<unknown>): Promise<{ wallMs: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { wallMs, cpuMs: (used.user + used.system) / 1000 };
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/eval-client.bench.js [--items 541] [--concurrency 16] [--rounds 7]');
  registerCatalogStages();
  const items = flag('--items', 541);
  const concurrency = flag('--concurrency', 16);
  const rounds = flag('--rounds', 7);
  const prompts = loadIfevalItems()
    .slice(0, items)
    .map((item) => item.prompt);
  const results: Record<string, unknown> = {};
  console.log(
    `eval client overhead: ${prompts.length} items, ${concurrency} at once, ${rounds} rounds; each round runs the bare loop and the eval stage back to back ` +
      '(order alternating), the ratio is the median of the per-round ratios; test server in a child process',
  );
  const perItem = (ms: number) => ms / prompts.length;
  for (const [name, timing] of [
    ['paced (20 ms first chunk, 2 ms per chunk)', { ttftMs: 20, tokenDelayMs: 2 }],
    ['zero delay (pure overhead)', {}],
  ] as Array<[string, StreamTiming]>) {
    const { child, url } = await startServer(timing);
    try {
      // Warm both paths once (connections, JIT, IFEval data).
      await bareLoop(url, prompts, concurrency);
      await stageRun(url, prompts, 'custom', concurrency);
      // Paired rounds: the machine's load moves between rounds, so each round's ratio compares two
      // runs made seconds apart, and the median of those ratios is what is reported.
      const ratios: number[] = [];
      const bares: Array<{ wallMs: number; cpuMs: number }> = [];
      const customs: Array<{ wallMs: number; cpuMs: number }> = [];
      const ifevals: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const runBare = () => measured(() => bareLoop(url, prompts, concurrency));
        const runStage = () => measured(() => stageRun(url, prompts, 'custom', concurrency));
        let bare: { wallMs: number; cpuMs: number };
        let custom: { wallMs: number; cpuMs: number };
        if (round % 2 === 0) {
          bare = await runBare();
          custom = await runStage();
        } else {
          custom = await runStage();
          bare = await runBare();
        }
        bares.push(bare);
        customs.push(custom);
        ratios.push(bare.wallMs / custom.wallMs);
        ifevals.push((await measured(() => stageRun(url, prompts, 'ifeval', concurrency))).wallMs);
      }
      const baseline = median(bares.map((run) => run.wallMs));
      const custom = median(customs.map((run) => run.wallMs));
      const row = {
        bareMsPerItem: perItem(baseline),
        stageMsPerItem: perItem(custom),
        overheadMsPerItem: perItem(median(customs.map((run, index) => run.wallMs - bares[index].wallMs))),
        ratio: median(ratios),
        ratioRange: [Math.min(...ratios), Math.max(...ratios)],
        bareCpuMsPerItem: perItem(median(bares.map((run) => run.cpuMs))),
        stageCpuMsPerItem: perItem(median(customs.map((run) => run.cpuMs))),
        withIfevalCheckersMsPerItem: perItem(median(ifevals)),
        ratioWithIfevalCheckers: baseline / median(ifevals),
      };
      results[name] = row;
      console.log(
        `${name}: bare ${row.bareMsPerItem.toFixed(3)} ms/item, eval stage ${row.stageMsPerItem.toFixed(3)} ms/item (+${row.overheadMsPerItem.toFixed(3)} ms), ` +
          `ratio ${row.ratio.toFixed(3)} (rounds ${row.ratioRange.map((value) => value.toFixed(3)).join('..')}; goal >= 0.9); ` +
          `client-process CPU ${row.bareCpuMsPerItem.toFixed(3)} vs ${row.stageCpuMsPerItem.toFixed(3)} ms/item; ` +
          `with the IFEval checkers ${row.withIfevalCheckersMsPerItem.toFixed(3)} ms/item, ratio ${row.ratioWithIfevalCheckers.toFixed(3)}`,
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
