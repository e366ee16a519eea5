import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Rng } from '../../../shared/random/rng';
import { completionTokensOf } from '../../../shared/models/testing/chat-chunk-script';
import {
  OpenAiTestServer,
  type RecordedRequest,
  type ScriptedChatResponse,
} from '../../../shared/models/testing/openai-test-server';

/**
 * The local OpenAI-compatible test server in a child process, scripted for replay tests and the
 * replay benchmark: its own event loop, so the server's timers and the replay client's parsing
 * do not delay each other. Each answer gets a TTFT and a per-token delay drawn (seeded) from
 * uniform ranges; the server records what it injected for every request it answers after the
 * first `/metrics` read (the replay reads it right after warmup), so tests can compare the
 * replay's percentiles with the injected ones.
 */
export interface ReplayServerScenario {
  seed: string;
  /** Uniform range of the TTFT delay per answer, ms. */
  ttftMs: [number, number];
  /** Uniform range of the per-token delay per answer (the same for every chunk of one answer), ms. */
  tokenDelayMs: [number, number];
  /** Final answer text (4 characters per token). */
  answer: string;
  /** Spec-decode counter increments per answer. */
  specDecodePerAnswer?: { drafts: number; draftTokens: number; accepted: number; acceptedPerPosition: number[] };
  /** The server stops answering for `durationMs` once it has received `afterMeasuredRequests` measured requests. */
  stall?: { afterMeasuredRequests: number; durationMs: number };
}

/** What the server did for one measured request. */
export interface InjectedAnswer {
  receivedAtEpochMs: number;
  /** Time the request was held by a stall before its TTFT delay started, ms. */
  stalledMs: number;
  ttftMs: number;
  tokenDelayMs: number;
  /** Completion tokens (usage) of the answer; the stream has tokens + 1 chunks after the first. */
  tokens: number;
  /** The answer carried text (its first text chunk came one token delay after the TTFT), not tool calls. */
  content: boolean;
  /** Which request this answered: the system message and the message count (unique per call of a session). */
  requestKey: string;
  /**
   * When the server actually wrote each chunk with choices, ms after the request reached the
   * responder (after any stall): the injected delays plus the server's own lateness. Filled as
   * the answer streams; complete once the client has read the answer.
   */
  choiceChunksWrittenMs: number[];
}

type ParentMessage = { type: 'start'; scenario: ReplayServerScenario } | { type: 'injected' } | { type: 'close' };
/** What the server injected, and how late its own event loop ran while answering (ms above its timer period). */
export interface InjectedReport {
  answers: InjectedAnswer[];
  eventLoopDelayP99Ms: number;
  eventLoopDelayMaxMs: number;
}

type ChildMessage = { type: 'ready'; url: string } | ({ type: 'injected' } & InjectedReport);

export interface ReplayServerProcess {
  /** Server root URL. */
  url: string;
  /** The child's process id (a benchmark pins it to a CPU of its own). */
  pid: number | undefined;
  injected(): Promise<InjectedReport>;
  close(): Promise<void>;
}

/** The compiled form of this file (tests run from sources; a child process needs JavaScript). */
function compiledScript(): string {
  if (__filename.endsWith('.js')) return __filename;
  const root = join(__dirname, '..', '..', '..');
  const script = join(root, 'dist', relative(root, __filename).replace(/\.ts$/, '.js'));
  if (!existsSync(script)) throw new Error(`${script} is missing: build first (make build-dev)`);
  return script;
}

export async function startReplayServerProcess(scenario: ReplayServerScenario): Promise<ReplayServerProcess> {
  const child: ChildProcess = fork(compiledScript(), ['--replay-test-server'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = <T extends ChildMessage['type']>(type: T): Promise<Extract<ChildMessage, { type: T }>> =>
    new Promise((resolve, reject) => {
      const onMessage = (message: ChildMessage) => {
        if (message.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(message as Extract<ChildMessage, { type: T }>);
      };
      const onExit = (code: number | null) => reject(new Error(`the replay test server exited with ${code}`));
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  const ready = next('ready');
  child.send({ type: 'start', scenario } satisfies ParentMessage);
  const { url } = await ready;
  return {
    url,
    pid: child.pid,
    async injected() {
      const reply = next('injected');
      child.send({ type: 'injected' } satisfies ParentMessage);
      const { type: _type, ...report } = await reply;
      return report;
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.send({ type: 'close' } satisfies ParentMessage);
      await exited;
    },
  };
}

/** Identifies a forced-history request: its system message and how many messages it sends. */
export function replayRequestKey(messages: ReadonlyArray<{ content?: unknown }>): string {
  return `${String(messages[0]?.content ?? '')}#${messages.length}`;
}

async function serve(scenario: ReplayServerScenario): Promise<OpenAiTestServer> {
  const rng = new Rng(scenario.seed);
  const answers: InjectedAnswer[] = [];
  let stallUntil = 0;
  // eslint-disable-next-line prefer-const -- assigned once the responder that reads it exists
  let server: OpenAiTestServer | undefined;
  // Requests are scanned once each: a scan of every request per answer grows with the run.
  let metricsRead = false;
  let scanned = 0;
  const metricsReadSoFar = (): boolean => {
    const requests = server?.requests ?? [];
    for (; !metricsRead && scanned < requests.length; scanned++) metricsRead = requests[scanned]?.path === '/metrics';
    return metricsRead;
  };
  const draw = ([low, high]: [number, number]) => low + rng.next() * (high - low);
  const responder = async (request: RecordedRequest): Promise<ScriptedChatResponse> => {
    let receivedAt = performance.now();
    const timing = { ttftMs: draw(scenario.ttftMs), tokenDelayMs: draw(scenario.tokenDelayMs) };
    const last = (request.body?.messages ?? []).at(-1) as { role?: string } | undefined;
    const script: ScriptedChatResponse =
      last?.role === 'user'
        ? {
            toolCalls: [{ name: 'get_item_detail', arguments: { item_id: 'item-1', fields: ['price', 'coupon'] } }],
            timing,
          }
        : { content: scenario.answer, timing };
    const measured = metricsReadSoFar();
    let stalledMs = 0;
    if (measured) {
      const stall = scenario.stall;
      if (stall && answers.length === stall.afterMeasuredRequests) stallUntil = Date.now() + stall.durationMs;
      const held = stallUntil - Date.now();
      if (held > 0) {
        stalledMs = held;
        await new Promise((resolve) => setTimeout(resolve, held));
        receivedAt = performance.now();
      }
      const written: number[] = [];
      script.onEventWritten = (choices) => {
        if (choices) written.push(performance.now() - receivedAt);
      };
      answers.push({
        receivedAtEpochMs: request.receivedAt,
        stalledMs,
        ttftMs: timing.ttftMs,
        tokenDelayMs: timing.tokenDelayMs,
        tokens: completionTokensOf(script),
        content: script.content !== undefined,
        requestKey: replayRequestKey((request.body?.messages ?? []) as Array<{ content?: unknown }>),
        choiceChunksWrittenMs: written,
      });
    }
    const spec = scenario.specDecodePerAnswer;
    if (spec && server) {
      server.metrics.increment('vllm:spec_decode_num_drafts_total', spec.drafts);
      server.metrics.increment('vllm:spec_decode_num_draft_tokens_total', spec.draftTokens);
      server.metrics.increment('vllm:spec_decode_num_accepted_tokens_total', spec.accepted);
      spec.acceptedPerPosition.forEach((accepted, position) =>
        server?.metrics.increment('vllm:spec_decode_num_accepted_tokens_per_pos_total', accepted, {
          position: String(position),
        }),
      );
    }
    return script;
  };
  server = await OpenAiTestServer.start({ responder, seed: scenario.seed });
  const started = server;
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  process.on('message', (message: ParentMessage) => {
    const lateness = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - 5);
    if (message.type === 'injected') {
      process.send?.({
        type: 'injected',
        answers,
        eventLoopDelayP99Ms: lateness(loopDelay.percentile(99)),
        eventLoopDelayMaxMs: lateness(loopDelay.max),
      } satisfies ChildMessage);
    }
    if (message.type === 'close') void started.close().then(() => process.exit(0));
  });
  return server;
}

if (require.main === module && process.argv.includes('--replay-test-server')) {
  process.once('message', (message: ParentMessage) => {
    if (message.type !== 'start') return;
    serve(message.scenario).then(
      (server) => process.send?.({ type: 'ready', url: server.url } satisfies ChildMessage),
      (error: unknown) => {
        process.stderr.write(`replay test server failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
}
