/**
 * replay stage. Input: recorded sessions (trajectories or production traces, JSONL or stage
 * manifests), a target model config, mode, load, warmup, percentiles and SLOs.
 * Parts: part i of n replays every n-th session of the replay order with 1/n of the load and
 * writes `<stage prefix>/part-NNNNN.json.gz` (records and raw samples). Finish merges the parts
 * exactly and writes `report.json`, `requests.csv`, `sessions.csv`, `report.html`, then
 * `manifest.json` last.
 * Idempotency: a part's object key comes from its index and is rewritten on retry; finish
 * rewrites the report objects from the part files. Retried: transient faults (the target or the
 * store unreachable); never: bad config or inputs. Calls that fail inside a replay are counted
 * in the report, not retried by the stage.
 */
import { defineStage, type StageDeps } from '../../queues/stage-kit/define-stage';
import { fileUriToPath } from '../../shared/artifacts/artifact-uri';
import { writeStageManifest } from '../../queues/stage-kit/stage-manifest';
import { expandInputs } from '../../queues/stage-kit/stage-inputs';
import { readJsonl } from '../../shared/artifacts/jsonl-reader';
import { manifestObjectOf } from '../../shared/artifacts/manifest';
import { loadHarness } from '../../shared/harness/load-harness';
import { BadInputError, TransientError } from '../../shared/errors';
import { hashValue } from '../../shared/hash/hash';
import type { ModelClient } from '../../shared/models/model-client';
import { modelErrorCodes } from '../../shared/models/model-errors';
import { createModelClient, modelConfigProblems, modelEndpointOf } from '../../shared/models/model-registry';
import { taskSchema, type Task } from '../../shared/simulator/tasks/task-schema';
import { createWorld, type World } from '../../shared/simulator/world/world';
import { loadTokenizerSource } from '../../queues/stage-kit/load-tokenizer-source';
import type { TokenCounter } from './call-measurement';
import { liveDriver, liveProblem } from './live-session';
import { loadShare } from './load-profile';
import { mergeReplayParts } from './merge-replay-parts';
import { readRecordedSessions, type OpenObject } from './read-recorded-sessions';
import type { ReplaySession, UnreplayableSession } from './recorded-session';
import {
  modelConfigOf,
  replayContract,
  type ReplayInput,
  type ReplayOutput,
  type ReplayPartInput,
  type ReplayPartOutput,
} from './replay-contract';
import { runReplayPart, type ScheduledSession } from './replay-engine';
import type { ReplayCallRecord } from './replay-records';
import { partFileOf, readReplayPartFile, REPLAY_PART_SCHEMA_VERSION, writeReplayPartFile } from './replay-part-file';
import { buildReplayReport, REPLAY_REPORT_SCHEMA_VERSION, type ReplayReport } from './replay-report';
import { callsCsv, sessionsCsv, turnsCsv } from './report-csv';
import { renderReplayHtml, servingFacts } from './report-html';
import { forcedHistoryDriver, type SessionDriver } from './session-driver';
import {
  renderSweepHtml,
  stepLoad,
  summarizeSweep,
  sweepStepOf,
  SWEEP_SCHEMA_VERSION,
  type SweepConfig,
  type SweepReport,
  type SweepStep,
} from './replay-sweep';
import { describeTarget } from './target-info';
import { toolThinkTimeFor } from './tool-latency-model';

/** Part i of n: which sessions and which share of the load (computed again by the part itself). A sweep is one part running its steps in turn. */
export function planReplay(input: ReplayInput): ReplayPartInput[] {
  if (input.sweep) return [{ index: 0, count: 1, config: input }];
  return Array.from({ length: input.parts }, (_, index) => ({ index, count: input.parts, config: input }));
}

/** What live mode runs tools against. */
interface LiveEnvironment {
  harness: Awaited<ReturnType<typeof loadHarness>>;
  worlds: Map<string, World>;
}

/** Replayable sessions, the ones skipped (with reasons) and the objects read. */
export async function loadReplaySessions(input: ReplayInput, openObject: OpenObject) {
  const recorded = await readRecordedSessions(input.inputs, openObject);
  const unreplayable: UnreplayableSession[] = [...recorded.unreplayable];
  let sessions = recorded.sessions;
  let live: LiveEnvironment | undefined;
  if (input.mode === 'live' && input.live) {
    const harnessDir = input.live.harness.startsWith('file://')
      ? fileUriToPath(input.live.harness)
      : input.live.harness;
    const harness = await loadHarness(harnessDir);
    const tasks = new Map<string, Task>();
    for (const { uri } of await expandInputs(input.live.tasks, openObject, 'replay.live.tasks', 'tasks')) {
      const { store, key } = openObject(uri);
      for await (const task of readJsonl(store, key, { schema: taskSchema })) tasks.set(task.id, task);
    }
    const worlds = new Map<string, World>();
    sessions = sessions.filter((session) => {
      const task = session.taskId === undefined ? undefined : tasks.get(session.taskId);
      const problem = liveProblem(session, harness, task !== undefined);
      if (problem) {
        unreplayable.push(problem);
        return false;
      }
      if (!worlds.has((task as Task).id)) worlds.set((task as Task).id, createWorld((task as Task).room));
      return true;
    });
    live = { harness, worlds };
  }
  return { sessions, unreplayable, objects: recorded.objects, live };
}

/**
 * The replay order: `total` sessions cycling through the replayable ones (repeats get `#<round>`
 * ids), and the share of part `index` of `count` (every count-th, from its index).
 */
export function scheduleSessions(
  sessions: readonly ReplaySession[],
  total: number,
  index: number,
  count: number,
): ScheduledSession[] {
  const scheduled: ScheduledSession[] = [];
  if (sessions.length === 0) return scheduled;
  for (let position = index; position < total; position += count) {
    const session = sessions[position % sessions.length];
    const round = Math.floor(position / sessions.length);
    scheduled.push({
      session: round === 0 ? session : { ...session, id: `${session.id}#${round}` },
      sessionIndex: position,
    });
  }
  return scheduled;
}

/**
 * The model config the replay builds its client from: without its own fields, and with no retries
 * on HTTP targets whose adapter takes `maxRetries` (`openai` and adapters built on its settings)
 * unless the config asks for them (a retried call would report its last attempt's latency and
 * hide the failed ones; vLLM's benchmark never retries).
 */
export function replayModelConfig(target: ReplayInput['target']): Record<string, unknown> & { adapter: string } {
  const model = modelConfigOf(target);
  if (model.maxRetries !== undefined || modelEndpointOf(model)?.baseUrl === undefined) return model;
  const withoutRetries = { ...model, maxRetries: 0 };
  return modelConfigProblems(withoutRetries).length === 0 ? withoutRetries : model;
}

/**
 * Where the server's Prometheus metrics are: configured, or where the target's adapter says its
 * endpoint serves them (`<root>/metrics` of an HTTP adapter; none for in-process models).
 */
export function metricsUrlOf(input: Pick<ReplayInput, 'metricsUrl' | 'target'>): string | undefined {
  if (input.metricsUrl === false) return undefined;
  if (input.metricsUrl !== undefined) return input.metricsUrl;
  return modelEndpointOf(modelConfigOf(input.target))?.metricsUrl;
}

/** The target server's root, as its adapter describes it (HTTP targets only). */
function endpointOf(input: ReplayInput): string | undefined {
  return modelEndpointOf(modelConfigOf(input.target))?.root;
}

async function tokenCounterOf(input: ReplayInput, deps: StageDeps): Promise<TokenCounter | undefined> {
  if (!input.outputTokenizer) return undefined;
  const tokenizer = await loadTokenizerSource(input.outputTokenizer, deps.openObject, 'outputTokenizer');
  return { count: (text) => tokenizer.encode(text).length };
}

export function createReplayProcessor(deps: StageDeps) {
  return (part: ReplayPartInput): Promise<ReplayPartOutput> => replayPart(part, deps);
}

/**
 * One part: reads and checks the sessions, builds the client, replays this part's share and
 * writes its part file. Exported for in-process use (tests, the benchmark).
 */
export async function replayPart(
  part: ReplayPartInput,
  deps: StageDeps,
  client?: ModelClient,
): Promise<ReplayPartOutput> {
  const input = part.config;
  if (input.sweep) return runSweep(input, input.sweep, deps, client);
  const loaded = await loadReplaySessions(input, deps.openObject);
  const schedule = scheduleSessions(loaded.sessions, input.sessions ?? loaded.sessions.length, part.index, part.count);
  const warmup =
    schedule.length === 0
      ? []
      : Array.from({ length: input.warmupSessions }, (_, position) => schedule[position % schedule.length]);
  const target =
    client ??
    createModelClient(replayModelConfig(input.target), {
      logger: deps.logger,
      services: deps.services,
      random: () => deps.rng.next(),
      configPath: 'replay.target',
    });
  try {
    const targetInfo = await describeTarget(target, {
      endpoint: endpointOf(input),
      label: input.targetLabel,
      ...(input.target.hardware !== undefined ? { hardware: input.target.hardware } : {}),
      ...(input.target.serving !== undefined ? { serving: input.target.serving } : {}),
    });
    const driverFor = (scheduled: ScheduledSession): SessionDriver => {
      // Seeded by the session's position in the replay order: the same times whatever part runs it.
      const toolThinkTime = toolThinkTimeFor(
        input.toolLatency,
        scheduled.session,
        deps.rng.fork(`tool-latency/${scheduled.sessionIndex}`),
      );
      const tools = toolThinkTime ? { toolThinkTime } : {};
      if (input.mode === 'live' && loaded.live) {
        const world = loaded.live.worlds.get(scheduled.session.taskId as string) as World;
        return liveDriver(scheduled.session, {
          harness: loaded.live.harness,
          world,
          maxStepsPerTurn: input.live?.maxStepsPerTurn,
          ...tools,
        });
      }
      return forcedHistoryDriver(scheduled.session, {
        maxTokensFromRecording: input.maxTokens === 'recorded',
        ...tools,
      });
    };
    const result = await runReplayPart({
      sessions: schedule,
      warmup,
      client: target,
      driverFor,
      load: loadShare(input.load, part.index, part.count),
      rng: deps.rng,
      part,
      ...(input.sampling ? { sampling: input.sampling } : {}),
      ...(input.ignoreEos ? { extraBody: { ignore_eos: true } } : {}),
      tokenizer: await tokenCounterOf(input, deps),
      metricsUrl: metricsUrlOf(input),
      signal: deps.signal,
      logger: deps.logger,
      onProgress: (done, total) => deps.progress({ done, total, message: `${done}/${total} sessions replayed` }),
    });
    failIfTargetNeverAnswered(result.calls, targetInfo.label);
    const specDecodeNames = result.specDecode.after?.specDecodeNames ?? result.specDecode.before?.specDecodeNames;
    if (targetInfo.server && specDecodeNames) {
      targetInfo.server.specDecodeMetrics = specDecodeNames;
      if (targetInfo.server.engine === undefined && specDecodeNames.some((name) => name.startsWith('vllm:')))
        targetInfo.server.engine = 'vllm';
      if (targetInfo.server.engine === undefined && specDecodeNames.some((name) => name.startsWith('sglang:')))
        targetInfo.server.engine = 'sglang';
    }
    const file = partFileOf(result, { target: targetInfo, unreplayable: part.index === 0 ? loaded.unreplayable : [] });
    const key = deps.output.key(`${deps.part?.id ?? `part-${String(part.index).padStart(5, '0')}`}.json.gz`);
    const info = await writeReplayPartFile(deps.store, key, file);
    return {
      key: info.key,
      uri: info.uri,
      sha256: info.sha256 ?? '',
      bytes: info.bytes,
      sessions: result.sessions.length,
      calls: result.calls.length,
      callsFailed: result.calls.filter((call) => call.status === 'failed').length,
      inputs: part.index === 0 ? loaded.objects : [],
    };
  } finally {
    if (!client) await target.close?.();
  }
}

/**
 * A report in which every call failed says nothing about latency: when the target refused every
 * request the config is wrong (permanent); when it never answered it may come back (retried).
 */
function failIfTargetNeverAnswered(calls: readonly ReplayCallRecord[], target: string): void {
  if (calls.length === 0 || calls.some((call) => call.status === 'ok')) return;
  const first = calls[0];
  const detail = `all ${calls.length} calls to ${target} failed; first: ${first.error ?? first.errorCode}`;
  if (calls.every((call) => call.errorCode === modelErrorCodes.badRequest)) {
    throw new BadInputError(
      'REPLAY_TARGET_REFUSED',
      `${detail}; check target (baseUrl, model) and the recorded requests`,
    );
  }
  throw new TransientError('REPLAY_TARGET_UNAVAILABLE', `${detail}; is the server up?`);
}

/**
 * deps writing under `<prefix>step-NN/`, seeded per step, outside any part. Every field is read
 * by name, not spread: the framework's deps build output, progress, rng, logger and signal on
 * first use (getters on a prototype), which a spread copy would leave out.
 */
export function sweepStepDeps(deps: StageDeps, index: number): StageDeps {
  const prefix = `${deps.output.prefix}step-${String(index).padStart(2, '0')}/`;
  return {
    store: deps.store,
    openObject: deps.openObject,
    run: deps.run,
    stage: deps.stage,
    attempt: deps.attempt,
    logger: deps.logger,
    clock: deps.clock,
    progress: deps.progress,
    signal: deps.signal,
    services: deps.services,
    rng: deps.rng.fork(`sweep-step-${index}`),
    output: {
      prefix,
      manifestKey: `${prefix}manifest.json`,
      key: (name) => `${prefix}${name}`,
      uri: (name) => deps.store.uriOf(`${prefix}${name}`),
    },
  };
}

/**
 * A capacity sweep in one part job: each ladder step is a whole replay (its parts side by side,
 * then its finish) under `step-NN/`, run in turn until one breaks the SLO; then sweep.json and
 * sweep.html. A retried job runs the steps again and rewrites them (same keys).
 */
async function runSweep(
  input: ReplayInput,
  sweep: SweepConfig,
  deps: StageDeps,
  client?: ModelClient,
): Promise<ReplayPartOutput> {
  const steps: SweepStep[] = [];
  let inputs: ReplayPartOutput['inputs'] = [];
  let target = '';
  const totals = { sessions: 0, calls: 0, callsFailed: 0 };
  let stoppedEarly = false;
  for (const [index, value] of sweep.ladder.entries()) {
    const { sweep: _sweep, ...rest } = input;
    const load = stepLoad(input.load, value);
    const stepInput: ReplayInput = {
      ...rest,
      load,
      ...(sweep.sessionsPerStep !== undefined ? { sessions: sweep.sessionsPerStep } : {}),
      parts: load.kind === 'closed' ? Math.min(input.parts, load.concurrency) : input.parts,
    };
    const depsOfStep = sweepStepDeps(deps, index);
    deps.progress({ done: index, total: sweep.ladder.length, message: `sweep step ${index} (load ${value})` });
    const parts = await Promise.all(planReplay(stepInput).map((part) => replayPart(part, depsOfStep, client)));
    const output = await finishReplay(stepInput, parts, depsOfStep);
    if (index === 0) inputs = parts[0]?.inputs ?? [];
    target = output.target;
    totals.sessions += output.sessions;
    totals.calls += output.calls;
    totals.callsFailed += output.callsFailed;
    const report = JSON.parse(
      (await deps.store.getBuffer(depsOfStep.output.key('report.json'))).toString('utf8'),
    ) as ReplayReport;
    const step = sweepStepOf(index, value, report, { reportUri: output.reportUri, htmlUri: output.htmlUri });
    steps.push(step);
    deps.logger.info(
      { step: index, load: value, verdict: step.verdict, latency: step.latency },
      'replay sweep step done',
    );
    if (step.verdict !== 'pass' && sweep.stopOnBreak) {
      stoppedEarly = index < sweep.ladder.length - 1;
      break;
    }
  }
  const report = summarizeSweep(
    {
      schemaVersion: SWEEP_SCHEMA_VERSION,
      kind: 'hat-replay-sweep',
      runId: deps.run.id,
      createdAt: new Date(deps.clock.now()).toISOString(),
      target,
      loadKind: input.load.kind,
      ladder: sweep.ladder,
      steps,
    },
    stoppedEarly,
  );
  await deps.store.put(deps.output.key('sweep.html'), renderSweepHtml(report), { contentType: 'text/html' });
  const info = await deps.store.put(deps.output.key('sweep.json'), `${JSON.stringify(report, null, 2)}\n`, {
    contentType: 'application/json',
  });
  return { key: info.key, uri: info.uri, sha256: info.sha256 ?? '', bytes: info.bytes, ...totals, inputs };
}

/** A sweep's finish: the manifest over sweep.json and sweep.html (each step wrote its own). */
async function finishSweep(input: ReplayInput, parts: ReplayPartOutput[], deps: StageDeps): Promise<ReplayOutput> {
  const part = parts[0];
  const sweep = JSON.parse((await deps.store.getBuffer(part.key)).toString('utf8')) as SweepReport;
  // Rewritten from sweep.json (same bytes as the part wrote): its put gives the sha256 the manifest needs.
  const htmlInfo = await deps.store.put(deps.output.key('sweep.html'), renderSweepHtml(sweep), {
    contentType: 'text/html',
  });
  const held = sweep.steps.find((step) => step.load === sweep.capacity?.load) ?? sweep.steps[0];
  const { info } = await writeStageManifest(deps, {
    objects: [
      {
        key: part.key,
        uri: part.uri,
        sha256: part.sha256,
        bytes: part.bytes,
        schemaVersion: SWEEP_SCHEMA_VERSION,
        format: 'json',
        kind: 'sweep',
      },
      manifestObjectOf(htmlInfo, { schemaVersion: SWEEP_SCHEMA_VERSION, format: 'html', kind: 'sweep-html' }),
    ],
    lineage: { inputs: part.inputs, configHash: hashValue(input) },
    stats: {
      capacity: sweep.capacity?.load ?? null,
      knee: sweep.knee?.load ?? null,
      steps: sweep.steps.length,
      target: sweep.target,
    },
  });
  return {
    manifestUri: info.uri,
    reportUri: part.uri,
    htmlUri: deps.output.uri('sweep.html'),
    requestsCsvUri: held ? held.reportUri.replace(/report\.json$/, 'requests.csv') : '',
    verdict: sweep.capacity ? 'pass' : sweep.steps.length > 0 ? 'fail' : 'no-data',
    objectives: (held?.objectives ?? []).map(({ metric, percentile, maxMs, observed, pass }) => ({
      metric,
      percentile,
      maxMs,
      observed,
      pass,
    })),
    sessions: part.sessions,
    calls: part.calls,
    callsFailed: part.callsFailed,
    unreplayable: 0,
    target: sweep.target,
    sweep: {
      steps: sweep.steps.length,
      capacity: sweep.capacity?.load ?? null,
      knee: sweep.knee?.load ?? null,
      stoppedBecause: sweep.stoppedBecause,
    },
  };
}

/** Fans in: merges the part files, writes the report, CSVs and HTML, then the manifest. */
export async function finishReplay(
  input: ReplayInput,
  parts: ReplayPartOutput[],
  deps: StageDeps,
): Promise<ReplayOutput> {
  if (input.sweep) return finishSweep(input, parts, deps);
  const files = await Promise.all(parts.map((part) => readReplayPartFile(deps.store, part.key)));
  const merged = mergeReplayParts(files);
  const createdAt = new Date(deps.clock.now()).toISOString();
  const report = buildReplayReport(merged, {
    runId: deps.run.id,
    createdAt,
    mode: input.mode,
    load: input.load,
    percentiles: input.percentiles,
    slo: input.slo,
  });
  const put = (name: string, body: string, contentType: string) =>
    deps.store.put(deps.output.key(name), body, { contentType });
  const reportInfo = await put('report.json', `${JSON.stringify(report, null, 2)}\n`, 'application/json');
  const requestsInfo = await put('requests.csv', callsCsv(merged.calls), 'text/csv');
  const sessionsInfo = await put('sessions.csv', sessionsCsv(merged.sessions), 'text/csv');
  const turnsInfo = await put('turns.csv', turnsCsv(merged.turns), 'text/csv');
  const htmlInfo = await put('report.html', renderReplayHtml(report), 'text/html');
  const { info } = await writeStageManifest(deps, {
    objects: [
      ...parts.map((part) => ({
        key: part.key,
        uri: part.uri,
        sha256: part.sha256,
        bytes: part.bytes,
        records: part.calls,
        schemaVersion: REPLAY_PART_SCHEMA_VERSION,
        format: 'json.gz',
        kind: 'part',
      })),
      manifestObjectOf(reportInfo, { schemaVersion: REPLAY_REPORT_SCHEMA_VERSION, format: 'json', kind: 'report' }),
      manifestObjectOf(requestsInfo, {
        schemaVersion: REPLAY_REPORT_SCHEMA_VERSION,
        format: 'csv',
        records: merged.calls.length,
        kind: 'requests',
      }),
      manifestObjectOf(sessionsInfo, {
        schemaVersion: REPLAY_REPORT_SCHEMA_VERSION,
        format: 'csv',
        records: merged.sessions.length,
        kind: 'sessions',
      }),
      manifestObjectOf(turnsInfo, {
        schemaVersion: REPLAY_REPORT_SCHEMA_VERSION,
        format: 'csv',
        records: merged.turns.length,
        kind: 'turns',
      }),
      manifestObjectOf(htmlInfo, { schemaVersion: REPLAY_REPORT_SCHEMA_VERSION, format: 'html', kind: 'report-html' }),
    ],
    lineage: { inputs: parts.flatMap((part) => part.inputs), configHash: hashValue(input) },
    stats: {
      verdict: report.slo.verdict,
      target: report.target.label,
      sessions: report.counts.sessions,
      calls: report.counts.calls,
      callsFailed: report.counts.callsFailed,
      unreplayable: report.counts.unreplayable,
      turnResponseP50Ms: report.metrics.turn_response_from_intended_ms?.summary.percentiles.p50 ?? null,
      turnResponseP95Ms: report.metrics.turn_response_from_intended_ms?.summary.percentiles.p95 ?? null,
      sessionE2eP50Ms: report.metrics.session_e2e_from_intended_ms?.summary.percentiles.p50 ?? null,
      sessionE2eP95Ms: report.metrics.session_e2e_from_intended_ms?.summary.percentiles.p95 ?? null,
    },
  });
  return {
    manifestUri: info.uri,
    reportUri: reportInfo.uri,
    htmlUri: htmlInfo.uri,
    requestsCsvUri: requestsInfo.uri,
    verdict: report.slo.verdict,
    objectives: report.slo.objectives.map(({ metric, percentile, maxMs, observed, pass }) => ({
      metric,
      percentile,
      maxMs,
      observed,
      pass,
    })),
    sessions: report.counts.sessions,
    calls: report.counts.calls,
    callsFailed: report.counts.callsFailed,
    unreplayable: report.counts.unreplayable,
    target: report.target.label,
    viewerTurns: {
      turns: report.counts.turns ?? 0,
      firstTokenP50Ms: report.metrics.turn_first_token_from_intended_ms?.summary.percentiles.p50 ?? null,
      firstTokenP95Ms: report.metrics.turn_first_token_from_intended_ms?.summary.percentiles.p95 ?? null,
      responseP50Ms: report.metrics.turn_response_from_intended_ms?.summary.percentiles.p50 ?? null,
      responseP95Ms: report.metrics.turn_response_from_intended_ms?.summary.percentiles.p95 ?? null,
      callsPerTurnMean: report.metrics.turn_calls?.summary.mean ?? null,
      toolMsPerTurnMean: report.metrics.turn_tool_ms?.summary.mean ?? null,
      modelMsPerTurnMean: report.metrics.turn_model_ms?.summary.mean ?? null,
    },
    serving: servingFacts(report.target)
      .filter(([key]) => key !== 'not readable')
      .map(([key, value]) => `${key}: ${value}`)
      .join('; '),
  };
}

export const replayStage = defineStage({
  ...replayContract,
  plan: planReplay,
  createProcessor: createReplayProcessor,
  finish: finishReplay,
});
