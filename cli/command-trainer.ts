import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ArtifactStore } from '../shared/artifacts/artifact-store';
import { tokenizerDirectory } from '../shared/models/onnx/tokenizer-source';
import type { QueueContext } from '../queues/bullmq/queue-context';
import { registerCheckpoint } from '../queues/runs/register-checkpoint';
import { getRunStatus } from '../queues/runs/run-control';
import { startHandoffPoller } from './handoff-poller';
import { projectRoot } from './project-root';
import {
  handoffPrefix,
  trainerFailureKey,
  trainingRequestKey,
  type CheckpointMarker,
  type TrainerExecutor,
  type TrainerFailure,
  type TrainingRequest,
} from '../queues/runs/run-handoff';

/**
 * The `command` executor: answers a run's handoffs with the pipeline's own trainer (`trainer/`,
 * Python) run as a local process, `python -m hat_trainer train --request <uri> --out <dir>`. For
 * each handoff waiting for a checkpoint it reads the request, trains from the previous handoff's
 * checkpoint (the request's `base`), uploads the trainer's result and log beside the request,
 * serves the exported ONNX model when asked, and registers the checkpoint through `hat checkpoint
 * register`'s code path with `simulated: false` and its lineage. A trainer that fails leaves
 * `trainer-failure.json` (exit code, last lines): the handoff fails with them and `hat runs retry`
 * trains again. Idempotent: the request's sha256 names the output directory, and the trainer
 * reuses a finished checkpoint for the same request and config.
 */

export interface CommandTrainerOptions {
  runId: string;
  /** Trained checkpoints go to `<workDir>/<runId>/<handoff>-<request sha256 prefix>/`. */
  workDir: string;
  storeFor(rootUri: string): ArtifactStore;
  /** Environment of the trainer process (S3 endpoint and credentials of the run's store). */
  environment: NodeJS.ProcessEnv;
  /** Which handoffs to answer: those whose `trainer.executor` is listed (default `command`), or all. */
  executors?: TrainerExecutor[] | 'all';
  /** The Python interpreter (default trainerPython()). */
  python?: string;
  /** Extra trainer config merged over the request's (e.g. a smaller step budget for tests). */
  configOverride?: Record<string, unknown>;
  /** Serves an exported model directory under `modelName`; returns the base URL (`http://host:port/v1`). */
  serve?(modelDir: string, modelName: string): Promise<string>;
  onEvent?(event: CommandTrainerEvent): void;
  /** Told about a tick that failed (it is tried again at the next interval). */
  onError?(error: Error): void;
  intervalMs?: number;
}

export type CommandTrainerEvent =
  | { kind: 'started'; handoff: string; outDir: string; base?: string }
  | { kind: 'progress'; handoff: string; step: number; loss: number; tokensPerSecond?: number }
  | { kind: 'registered'; handoff: string; result: TrainerResult; endpoint?: string; model?: string }
  | { kind: 'failed'; handoff: string; exitCode: number | null; lastLines: string[] };

/** What `trainer/` writes last to `<out>/result.json` (the fields read here). */
export interface TrainerResult {
  requestUri: string;
  requestSha256: string;
  objective: 'sft' | 'opd' | 'rl';
  steps: number;
  finalLoss: number | null;
  tokensPerSecond?: number;
  lossCurve?: Array<{ step: number; loss: number }>;
  titoProof?: { maxAbsDiff: number; meanAbsDiff?: number; tokens?: number; tolerance?: number };
  reverseKl?: { before: number; after: number };
  /** RL: how many records carry a non-zero advantage (the others teach nothing). */
  advantages?: { records: number; nonZero: number };
  onnx?: { maxAbsLogitDiff: number };
  policyVersion?: number;
  baseCheckpoint?: string | null;
  dataSha256s: string[];
  configHash: string;
  hfDir: string;
  onnxDir: string;
  tokenizerFingerprint?: string;
}

/** `trainer/` of this checkout. */
export function trainerDirectory(): string {
  return join(projectRoot(), 'trainer');
}

/** The trainer's interpreter: HAT_TRAINER_PYTHON, else the virtual environment `make trainer` builds. */
export function trainerPython(environment: NodeJS.ProcessEnv = process.env): string {
  return environment.HAT_TRAINER_PYTHON ?? join(trainerDirectory(), '.venv', 'bin', 'python');
}

/** A local path from a checkpoint's `checkpointUri` (`file://` or a plain path); undefined for remote URIs. */
function localPath(uri: string | undefined): string | undefined {
  if (uri === undefined) return undefined;
  if (uri.startsWith('file://')) return fileURLToPath(uri);
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(uri) ? undefined : uri;
}

const lastLineCount = 40;

/** Starts answering the run's handoffs; `stop()` ends it (and waits for a training under way). */
export function startCommandTrainer(context: QueueContext, options: CommandTrainerOptions): { stop(): Promise<void> } {
  const answered = new Set<string>();
  const executors = options.executors ?? ['command'];

  const train = async (artifactsRoot: string, handoff: string, stopped: () => boolean): Promise<void> => {
    const store = options.storeFor(artifactsRoot);
    if (await store.head(trainerFailureKey(options.runId, handoff))) return; // the handoff has yet to read it
    const requestBytes = await store.getBuffer(trainingRequestKey(options.runId, handoff));
    const request = JSON.parse(requestBytes.toString('utf8')) as TrainingRequest;
    const executor = request.trainer?.executor ?? 'external';
    // Another executor's handoff is never ours (its request does not change): not read again.
    answered.add(handoff);
    if (executors !== 'all' && !executors.includes(executor)) return;
    const requestUri = `${artifactsRoot}/${trainingRequestKey(options.runId, handoff)}`;
    const requestSha256 = createHash('sha256').update(requestBytes).digest('hex');
    const outDir = resolve(options.workDir, options.runId, `${handoff}-${requestSha256.slice(0, 16)}`);
    await mkdir(dirname(outDir), { recursive: true });
    const base = localPath(request.base?.checkpoint.checkpointUri);
    const configFile = `${outDir}.config.json`;
    await writeFile(
      configFile,
      `${JSON.stringify({ ...request.trainer?.config, ...options.configOverride }, null, 2)}\n`,
    );
    const tokenizer = tokenizerDirectory(request.tokenizer?.name ?? 'qwen3');
    const args = ['-m', 'hat_trainer', 'train', '--request', requestUri, '--out', outDir, '--config', configFile];
    if (base) args.push('--base', base);
    if (tokenizer) args.push('--tokenizer-dir', tokenizer);
    options.onEvent?.({ kind: 'started', handoff, outDir, ...(base ? { base } : {}) });
    const logFile = `${outDir}.log`;
    const outcome = await runTrainer(options.python ?? trainerPython(options.environment), args, {
      environment: options.environment,
      logFile,
      onProgress: (step, loss, tokensPerSecond) =>
        options.onEvent?.({
          kind: 'progress',
          handoff,
          step,
          loss,
          ...(tokensPerSecond !== undefined ? { tokensPerSecond } : {}),
        }),
    });
    const prefix = handoffPrefix(options.runId, handoff);
    await store.put(`${prefix}training.log`, await readFile(logFile), { contentType: 'text/plain' });
    const logUri = `${artifactsRoot}/${prefix}training.log`;
    if (outcome.exitCode !== 0) {
      const failure: TrainerFailure = {
        exitCode: outcome.exitCode,
        signal: outcome.signal,
        lastLines: outcome.lastLines,
        logUri,
        failedAt: new Date().toISOString(),
      };
      await store.put(trainerFailureKey(options.runId, handoff), `${JSON.stringify(failure, null, 2)}\n`, {
        contentType: 'application/json',
      });
      // Answered again once `hat runs retry` puts the handoff back to waiting. Until the handoff has
      // read the failure and failed it still reads as waiting: wait for that here (a few polls).
      await waitForHandoffFailed(context, options.runId, handoff, stopped);
      answered.delete(handoff);
      options.onEvent?.({ kind: 'failed', handoff, exitCode: outcome.exitCode, lastLines: outcome.lastLines });
      return;
    }
    const resultBytes = await readFile(join(outDir, 'result.json'));
    const result = JSON.parse(resultBytes.toString('utf8')) as TrainerResult;
    await store.put(`${prefix}training.json`, resultBytes, { contentType: 'application/json' });
    const model = `hat-trained-${handoff}${result.policyVersion !== undefined ? `-v${result.policyVersion}` : ''}`;
    const endpoint = options.serve ? await options.serve(result.onnxDir, model) : undefined;
    await registerCheckpoint(context, {
      runId: options.runId,
      handoff,
      modelDir: result.onnxDir,
      ...(endpoint !== undefined ? { endpoint, model } : {}),
      checkpointUri: result.hfDir,
      requestUri,
      // The version the trainer made (the base's + 1, or the one the request asked for): stages may reference it.
      ...((request.policyVersion ?? result.policyVersion) !== undefined
        ? { policyVersion: request.policyVersion ?? result.policyVersion }
        : {}),
      ...(result.tokenizerFingerprint ? { tokenizerFingerprint: result.tokenizerFingerprint } : {}),
      simulated: false,
      registeredBy: 'hat-trainer',
      lineage: lineageOf(result, request),
      training: trainingOf(result, `${artifactsRoot}/${prefix}training.json`),
      checkEndpoint: endpoint !== undefined,
      environment: options.environment,
      storeFor: options.storeFor,
      now: new Date(),
    });
    options.onEvent?.({
      kind: 'registered',
      handoff,
      result,
      ...(endpoint !== undefined ? { endpoint, model } : {}),
    });
  };

  return startHandoffPoller(context, {
    runId: options.runId,
    intervalMs: options.intervalMs ?? 500,
    ...(options.onError ? { onError: options.onError } : {}),
    async answer(handoff, status, stopped) {
      if (!answered.has(handoff.name)) await train(status.artifactsRoot, handoff.name, stopped);
    },
  });
}

/** Polls (100 ms) until the handoff has failed, up to 5 minutes (its poll interval may be long). */
async function waitForHandoffFailed(
  context: QueueContext,
  runId: string,
  handoff: string,
  stopped: () => boolean,
): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (!stopped() && Date.now() < deadline) {
    const status = await getRunStatus(context, runId);
    const state = status.handoffs?.find((entry) => entry.name === handoff)?.state;
    if (state !== 'waiting-for-checkpoint') return;
    await new Promise((resolveDelay) => setTimeout(resolveDelay, 100));
  }
}

function lineageOf(result: TrainerResult, request: TrainingRequest): NonNullable<CheckpointMarker['lineage']> {
  return {
    requestUri: result.requestUri,
    requestSha256: result.requestSha256,
    dataSha256s: result.dataSha256s,
    ...(request.base ? { baseCheckpoint: request.base.markerUri } : {}),
    trainerConfigHash: result.configHash,
    codeVersion: request.codeVersion,
  };
}

function trainingOf(result: TrainerResult, reportUri: string): NonNullable<CheckpointMarker['training']> {
  return {
    objective: result.objective,
    steps: result.steps,
    finalLoss: result.finalLoss,
    ...(result.tokensPerSecond !== undefined ? { tokensPerSecond: result.tokensPerSecond } : {}),
    ...(result.titoProof ? { titoMaxAbsDiff: result.titoProof.maxAbsDiff } : {}),
    ...(result.onnx ? { onnxMaxAbsLogitDiff: result.onnx.maxAbsLogitDiff } : {}),
    ...(result.reverseKl ? { reverseKlBefore: result.reverseKl.before, reverseKlAfter: result.reverseKl.after } : {}),
    ...(result.advantages ? { advantages: result.advantages } : {}),
    reportUri,
  };
}

interface TrainerOutcome {
  exitCode: number | null;
  signal: string | null;
  lastLines: string[];
}

/**
 * Runs the trainer with `trainer/` as its working directory (the `hat_trainer` package), its
 * output to `logFile`, and the JSON progress lines it writes to stderr turned into callbacks.
 */
function runTrainer(
  python: string,
  args: string[],
  options: {
    environment: NodeJS.ProcessEnv;
    logFile: string;
    onProgress(step: number, loss: number, tokensPerSecond?: number): void;
  },
): Promise<TrainerOutcome> {
  return new Promise((resolvePromise) => {
    const log = createWriteStream(options.logFile);
    const lastLines: string[] = [];
    const child = spawn(python, args, {
      cwd: trainerDirectory(),
      env: { ...options.environment, PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const onLines = (stream: NodeJS.ReadableStream) => {
      let pending = '';
      stream.on('data', (chunk: Buffer) => {
        log.write(chunk);
        pending += chunk.toString('utf8');
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) {
          if (line.trim() === '') continue;
          lastLines.push(line);
          if (lastLines.length > lastLineCount) lastLines.shift();
          const progress = parseProgress(line);
          if (progress) options.onProgress(progress.step, progress.loss, progress.tokensPerSecond);
        }
      });
    };
    onLines(child.stdout);
    onLines(child.stderr);
    const finish = (exitCode: number | null, signal: string | null) =>
      log.end(() => resolvePromise({ exitCode, signal, lastLines }));
    child.on('error', (error) => {
      lastLines.push(`could not start ${python}: ${error.message}; run \`make trainer\` (or set HAT_TRAINER_PYTHON)`);
      finish(127, null);
    });
    child.on('close', (code, signal) => finish(code, signal));
  });
}

/** A progress line of the trainer: `{"event": "step", "step": 3, "loss": 5.1, "tokensPerSecond": 1800, ...}`. */
function parseProgress(line: string): { step: number; loss: number; tokensPerSecond?: number } | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(line) as Record<string, unknown>;
    if (typeof value.step !== 'number' || typeof value.loss !== 'number') return undefined;
    const rate = value.tokensPerSecond ?? value.tokens_per_second;
    return { step: value.step, loss: value.loss, ...(typeof rate === 'number' ? { tokensPerSecond: rate } : {}) };
  } catch {
    return undefined;
  }
}
