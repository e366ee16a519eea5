/**
 * Client overhead of the `openai` model client. The same requests go to the local test server
 * (zero model delay, in a child process so the two event loops do not share one queue) three
 * ways, at 1 and at 64 concurrent requests: a bare node:http loop that only reads the bytes, a
 * bare fetch loop (the other transport Node offers), and the client (SSE parsing, tool-call
 * assembly, limiter, timings). Three figures per mode:
 *   - end-to-end latency percentiles and their difference to the bare node:http loop;
 *   - own time per call: total time minus the send-to-last-chunk window (body building, gate,
 *     final assembly, promise hops), as p50/p99 over all calls, and p99 without each run's start
 *     burst (its first `concurrency` calls all start in one tick, so the last of them waits for
 *     the request setup of all the others: a burst of 64 simultaneous calls, not 64 in flight);
 *   - event-loop busy time per call (everything the process did for the call, parsing included).
 * Prints figures, never asserts on time.
 *
 *   make build-dev && node dist/bench/openai-client.bench.js [--calls 4000]
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { ChatRequest } from '../shared/models/model-client';
import { createModelClient } from '../shared/models/model-registry';
import { OpenAiTestServer } from '../shared/models/testing/openai-test-server';
import { registerModelAdapters } from '../workers/register-model-adapters';
import { checkBenchFlags, endsWithThisProcess } from './bench-flags';

registerModelAdapters();

const answer = {
  content: 'The coat comes in navy, black and fog blue; fog blue runs small.',
  toolCalls: [{ id: 'call_0', name: 'sku_stock', arguments: { itemId: 'A1', color: 'fog blue', size: 'M' } }],
};

const request: ChatRequest = {
  messages: [
    {
      role: 'system',
      content: 'You are the host of a live-stream sales room. Answer briefly and use tools for stock.',
    },
    { role: 'user', content: 'Is the fog blue coat in stock in M?' },
  ],
};

export interface ModeResult {
  /** End-to-end latency per call, ms, sorted. */
  latencies: number[];
  /** Per call: latency minus the send-to-last-chunk window, ms, sorted. */
  ownTimes: number[];
  /** The same without the run's first `concurrency` calls (started together), sorted. */
  steadyOwnTimes: number[];
  /** Event-loop busy time per call, ms. */
  busyMsPerCall: number;
  seconds: number;
}

/** One call; resolves to the ms from sending to the last streamed chunk. */
export type Call = () => Promise<number>;

/** Linear-interpolation percentile (as vLLM's benchmark computes them). */
export function percentile(sorted: number[], share: number): number {
  if (sorted.length === 0) return Number.NaN;
  const position = (sorted.length - 1) * share;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - lower);
}

function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

export async function runMode(calls: number, concurrency: number, call: Call): Promise<ModeResult> {
  const latencies: number[] = [];
  const ownTimes: number[] = [];
  const steadyOwnTimes: number[] = [];
  let next = 0;
  const busyBefore = performance.eventLoopUtilization();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) {
        const index = next++;
        const begun = performance.now();
        const window = await call();
        const latency = performance.now() - begun;
        latencies.push(latency);
        ownTimes.push(latency - window);
        if (index >= concurrency) steadyOwnTimes.push(latency - window);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const busy = performance.eventLoopUtilization(busyBefore);
  const sort = (values: number[]): number[] => values.sort((left, right) => left - right);
  return {
    latencies: sort(latencies),
    ownTimes: sort(ownTimes),
    steadyOwnTimes: sort(steadyOwnTimes),
    busyMsPerCall: busy.active / calls,
    seconds,
  };
}

function merge(left: ModeResult | undefined, right: ModeResult): ModeResult {
  if (!left) return right;
  const sort = (values: number[]): number[] => values.sort((first, second) => first - second);
  return {
    latencies: sort([...left.latencies, ...right.latencies]),
    ownTimes: sort([...left.ownTimes, ...right.ownTimes]),
    steadyOwnTimes: sort([...left.steadyOwnTimes, ...right.steadyOwnTimes]),
    busyMsPerCall: (left.busyMsPerCall + right.busyMsPerCall) / 2,
    seconds: left.seconds + right.seconds,
  };
}

async function serve(): Promise<void> {
  const server = await OpenAiTestServer.start({ responder: () => answer });
  process.send?.({ url: server.url });
  process.on('message', () => {
    void server.close().then(() => process.exit(0));
  });
}

async function startServerProcess(): Promise<{ child: ChildProcess; url: string }> {
  const child = endsWithThisProcess(fork(__filename, ['--serve'], { stdio: 'inherit' }));
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`test server exited with ${code}`)));
  });
  return { child, url };
}

/** The baseline: a bare node:http POST of a streaming chat request that only reads the bytes. */
export function bareHttpCall(
  url: string,
  chatRequest: Pick<ChatRequest, 'messages' | 'tools'>,
  model: string,
  agent: http.Agent,
): Call {
  const body = Buffer.from(
    JSON.stringify({
      model,
      messages: chatRequest.messages,
      ...(chatRequest.tools ? { tools: chatRequest.tools } : {}),
      stream: true,
      stream_options: { include_usage: true },
    }),
  );
  const target = new URL(`${url}/v1/chat/completions`);
  return () =>
    new Promise((resolve, reject) => {
      const sent = performance.now();
      let last = sent;
      const outgoing = http.request(
        target,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
        (response) => {
          response.on('data', () => {
            last = performance.now();
          });
          response.on('end', () => resolve(last - sent));
          response.on('error', reject);
        },
      );
      outgoing.on('error', reject);
      outgoing.end(body);
    });
}

async function main(): Promise<void> {
  checkBenchFlags('node dist/bench/openai-client.bench.js [--calls 4000]');
  const callsFlag = process.argv.indexOf('--calls');
  const calls = callsFlag > 0 ? Number(process.argv[callsFlag + 1]) : 4000;
  const { child, url } = await startServerProcess();
  const model = 'test-model';
  const body = Buffer.from(
    JSON.stringify({ model, messages: request.messages, stream: true, stream_options: { include_usage: true } }),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const target = new URL(`${url}/v1/chat/completions`);
  const bareHttp = bareHttpCall(url, request, model, agent);
  const bareFetch: Call = async () => {
    const sent = performance.now();
    const response = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    let last = sent;
    for await (const _piece of response.body ?? []) last = performance.now();
    return last - sent;
  };
  const client = createModelClient({ adapter: 'openai', baseUrl: `${url}/v1`, model, concurrency: 64, maxRetries: 0 });
  const expectedArguments = JSON.stringify(answer.toolCalls[0]?.arguments);
  const viaClient: Call = async () => {
    const response = await client.chat(request);
    if (response.message.tool_calls?.[0]?.function.arguments !== expectedArguments)
      throw new Error('the client assembled a wrong tool call');
    return response.timings.queueMs + response.timings.e2eMs;
  };
  const modes: Array<[string, Call]> = [
    ['bare node:http', bareHttp],
    ['bare fetch', bareFetch],
    ['openai client', viaClient],
  ];
  for (const [, call] of modes) await runMode(500, 16, call);

  const rows: Array<Record<string, string | number>> = [];
  const summary: Record<string, unknown> = {};
  for (const concurrency of [1, 64]) {
    const results = new Map<string, ModeResult>();
    const rounds = 4;
    // Interleaved rounds, so drift on a shared machine hits every mode alike.
    for (let round = 0; round < rounds; round++) {
      for (const [name, call] of modes) {
        results.set(
          name,
          merge(
            results.get(name),
            await runMode(Math.round((concurrency === 1 ? calls / 4 : calls) / rounds), concurrency, call),
          ),
        );
      }
    }
    const bare = results.get('bare node:http') as ModeResult;
    for (const [name, result] of results) {
      const figures = {
        p50Ms: percentile(result.latencies, 0.5),
        p99Ms: percentile(result.latencies, 0.99),
        p50OverheadVsBareMs: percentile(result.latencies, 0.5) - percentile(bare.latencies, 0.5),
        p99OverheadVsBareMs: percentile(result.latencies, 0.99) - percentile(bare.latencies, 0.99),
        meanRatioVsBare: mean(result.latencies) / mean(bare.latencies),
        ownP50Ms: percentile(result.ownTimes, 0.5),
        ownP99Ms: percentile(result.ownTimes, 0.99),
        steadyOwnP99Ms: percentile(result.steadyOwnTimes, 0.99),
        busyMsPerCall: result.busyMsPerCall,
        busyRatioVsBare: result.busyMsPerCall / bare.busyMsPerCall,
        requestsPerSecond: result.latencies.length / result.seconds,
      };
      rows.push({
        concurrency,
        mode: name,
        'p50 ms': figures.p50Ms.toFixed(3),
        'p99 ms': figures.p99Ms.toFixed(3),
        'Δp50 vs bare': figures.p50OverheadVsBareMs.toFixed(3),
        'Δp99 vs bare': figures.p99OverheadVsBareMs.toFixed(3),
        'own p50 ms': figures.ownP50Ms.toFixed(3),
        'own p99 ms': figures.ownP99Ms.toFixed(3),
        'own p99 steady': figures.steadyOwnP99Ms.toFixed(3),
        'busy ms/call': figures.busyMsPerCall.toFixed(3),
        'busy × bare': figures.busyRatioVsBare.toFixed(2),
        'req/s': figures.requestsPerSecond.toFixed(0),
      });
      summary[`c${concurrency} ${name}`] = Object.fromEntries(
        Object.entries(figures).map(([key, value]) => [key, Number(value.toFixed(3))]),
      );
    }
  }
  console.log('openai client overhead against the local test server (zero model delay, separate process)');
  console.table(rows);
  const clientAt64 = summary['c64 openai client'] as {
    ownP99Ms: number;
    steadyOwnP99Ms: number;
    busyMsPerCall: number;
  };
  const bareAt64 = summary['c64 bare node:http'] as { busyMsPerCall: number };
  console.log(
    `at 64 concurrent: client own time p99 ${clientAt64.ownP99Ms.toFixed(3)} ms over all calls, ${clientAt64.steadyOwnP99Ms.toFixed(3)} ms without the start bursts (goal < 1 ms); event-loop work per call ${(clientAt64.busyMsPerCall - bareAt64.busyMsPerCall).toFixed(3)} ms above the bare loop`,
  );
  console.log(JSON.stringify({ benchmark: 'openai-client', calls, ...summary }));
  await client.close?.();
  agent.destroy();
  child.send('stop');
}

// Other benchmarks import runMode and bareHttpCall; only running this file runs it.
if (require.main === module) {
  if (process.argv[2] === '--serve') {
    void serve();
  } else {
    main().catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
  }
}
