import { z } from 'zod';
import type { StageDeps } from '../../queues/stage-kit/define-stage';
import { loadHarnessFromUri } from '../../queues/stage-kit/load-harness-from-uri';
import { readRecordRange } from '../../queues/stage-kit/stage-inputs';
import { writeJsonl } from '../../shared/artifacts/jsonl-writer';
import { HatError, TransientError } from '../../shared/errors';
import { sha256Hex } from '../../shared/hash/hash';
import { harnessHash } from '../../shared/harness/harness-hash';
import type { Harness } from '../../shared/harness/harness-types';
import { sampleHarnessDirectory } from '../../shared/harness/sample-harness';
import type { ModelClient } from '../../shared/models/model-client';
import { createModelClient } from '../../shared/models/model-registry';
import { scriptedServiceKeys } from '../../shared/simulator/policies/scripted-adapter';
import type { Task } from '../../shared/simulator/tasks/task-schema';
import type { EvalInput, EvalModel, EvalPartInput, EvalPartOutput } from './eval-contract';
import type { AnyEvalSuite, PreparedHarness, SuiteItem } from './suites/eval-suite';
import { evalSuiteOf } from './suites/registry';
import { defaultJudgeRubric, judgeResponse, rubricHash, type JudgeVerdict } from './judge';
import { cacheLocationOf, endpointIdentityOf, withResponseCache, type CacheCounts } from './response-cache';

export const EVAL_RESULT_SCHEMA_VERSION = 1;

const checkOutcomeSchema = z.object({ name: z.string(), strict: z.boolean(), loose: z.boolean() });

/** One model's answer to one item, every check's outcome, its score, latency and usage (`results/*.jsonl.gz`). */
export const evalResultSchema = z.object({
  schemaVersion: z.literal(EVAL_RESULT_SCHEMA_VERSION),
  suite: z.string(),
  itemId: z.string(),
  /** The model's label. */
  model: z.string(),
  category: z.string().optional(),
  /** live_stream_qa: a held-out generated task or imported production Q&A. */
  origin: z.enum(['generated', 'imported']).optional(),
  /** harness_variant_qa: which harness the item ran under. */
  harness: z
    .object({
      kind: z.enum(['canonical', 'variant']),
      hash: z.string().optional(),
      families: z.array(z.string()).optional(),
      heldOutVariant: z.boolean().optional(),
      heldOutOperator: z.boolean().optional(),
    })
    .optional(),
  prompt: z.string(),
  /** The model's final reply (episodes: the replies of every turn, one per line). */
  response: z.string(),
  status: z.enum(['ok', 'step_limit', 'model_error', 'timeout']),
  error: z.string().optional(),
  /** The rule score, 0–100: the verifier's reward × 100 (episodes) or 100 when every check passed (strict). Null: judge-only item. */
  score: z.number().nullable(),
  /** Episodes: the verifier's components, 0–1. */
  components: z.record(z.string(), z.number()).optional(),
  /** ifeval and custom: each instruction check, strict and loose. */
  checks: z.array(checkOutcomeSchema).default([]),
  followedStrict: z.boolean().optional(),
  followedLoose: z.boolean().optional(),
  /** Summed end-to-end latency of the model calls, ms (wall time: not deterministic). */
  latencyMs: z.number().nonnegative(),
  calls: z.number().int().nonnegative(),
  usage: z.object({ promptTokens: z.number().int().nonnegative(), completionTokens: z.number().int().nonnegative() }),
  judge: z
    .object({
      score: z.number().nullable(),
      rating: z.number().optional(),
      reason: z.string().optional(),
      missing: z.boolean(),
      error: z.string().optional(),
      rubricHash: z.string(),
    })
    .optional(),
});
export type EvalResult = z.infer<typeof evalResultSchema>;

/** The canonical harness a config names (default: the sample live-host harness). */
export function harnessUriOf(config: Pick<EvalInput, 'harness'>): string {
  return config.harness ?? sampleHarnessDirectory();
}

/** Runs `work` over `items`, at most `limit` at once; the first failure stops new starts and is thrown. */
async function forEachConcurrently<T>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        await work(items[index], index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/**
 * Each item's signal: aborted at its deadline, or when the part's signal aborts. One controller
 * and one timer per item, and one listener on the part's signal for all of them: no
 * `AbortSignal.any` per item (a composite signal with weak references and a finalization entry
 * per call, which the eval client overhead bench measured at tens of microseconds an item).
 */
class ItemDeadlines {
  private readonly active = new Set<AbortController>();
  private readonly onPartAbort = (): void => {
    for (const controller of this.active) controller.abort(this.part.reason);
  };

  constructor(
    private readonly part: AbortSignal,
    private readonly timeoutMs: number,
    private readonly timeoutError: () => Error,
  ) {
    part.addEventListener('abort', this.onPartAbort, { once: true });
  }

  start(): { signal: AbortSignal; done: () => void } {
    const controller = new AbortController();
    if (this.part.aborted) controller.abort(this.part.reason);
    this.active.add(controller);
    const timer = setTimeout(() => controller.abort(this.timeoutError()), this.timeoutMs);
    return {
      signal: controller.signal,
      done: () => {
        clearTimeout(timer);
        this.active.delete(controller);
      },
    };
  }

  close(): void {
    this.part.removeEventListener('abort', this.onPartAbort);
  }
}

/** The integer sampling seed of an item (OpenAI `seed`: 31 bits), the same on every attempt. */
function samplingSeedOf(seed: string, label: string, itemId: string): number {
  return Number.parseInt(sha256Hex(`${seed}/eval/${label}/${itemId}`).slice(0, 8), 16) & 0x7fffffff;
}

export type { PreparedHarness } from './suites/eval-suite';

/**
 * One part: one model on a slice of one suite's items. Plays episodes (live_stream_qa,
 * harness_variant_qa) or asks single prompts (ifeval, custom), checks and scores every answer,
 * asks the judge where configured, and writes the results as gzip JSONL. A model error on an
 * item is recorded on it (score 0); a part where most items hit endpoint errors is retried.
 */
export async function runEvalPart(part: EvalPartInput, deps: StageDeps): Promise<EvalPartOutput> {
  const config = part.config;
  const suite = evalSuiteOf(part.suite);
  const { records: items, sha256 } = await readRecordRange(
    deps.openObject,
    part.items.uri,
    suite.itemSchema,
    part.items.start,
    part.items.start + part.items.count,
  );
  if (sha256 !== part.items.sha256)
    throw new HatError(
      'EVAL_PLAN_CHANGED',
      `${part.items.uri} changed after the stage was planned (sha256 differs); rerun the whole stage`,
    );
  const canonical = suite.needsHarness ? await loadHarnessFromUri(harnessUriOf(config), deps.openObject) : undefined;
  if (canonical && harnessHash(canonical) !== part.harnessHash) {
    throw new HatError(
      'EVAL_HARNESS_CHANGED',
      `the harness at ${harnessUriOf(config)} changed after the stage was planned; rerun the whole stage`,
    );
  }
  const canonicalPrepared: PreparedHarness | undefined = canonical
    ? { harness: canonical, hash: part.harnessHash }
    : undefined;
  const harnesses = await Promise.all(
    items.map(async (item): Promise<PreparedHarness | undefined> =>
      suite.prepareHarness?.(item, { canonical: canonicalPrepared, openObject: deps.openObject }),
    ),
  );

  const clientDependencies = (configPath: string, tasks: readonly Task[], simulatorHarnesses: readonly Harness[]) => ({
    logger: deps.logger,
    random: () => deps.rng.next(),
    configPath,
    // The scripted policies answer simulator tasks only: they are handed the tasks and harnesses they play.
    services: {
      ...deps.services,
      [scriptedServiceKeys.tasks]: tasks,
      [scriptedServiceKeys.harnesses]: simulatorHarnesses,
    },
  });
  const clients = new Map<string, ModelClient>();
  // Served models' answers come from the response cache when they were asked before (response-cache.ts).
  const cacheLocation = cacheLocationOf(config, deps);
  const cacheCounts: CacheCounts = { hits: 0, misses: 0 };
  let cacheUsed = false;
  const cached = (client: ModelClient, model: EvalModel['model'], checkpoint?: string): ModelClient => {
    const identity = cacheLocation ? endpointIdentityOf(model, checkpoint) : undefined;
    if (!cacheLocation || !identity) return client;
    cacheUsed = true;
    return withResponseCache(client, cacheLocation, identity, cacheCounts);
  };
  const clientFor = (index: number): ModelClient => {
    const prepared = harnesses[index];
    // The scripted expert tells harnesses apart by their tool names: one client per harness.
    const key = part.model.model.adapter === 'scripted' && prepared ? prepared.hash : 'shared';
    let client = clients.get(key);
    if (!client) {
      const tasks = items
        .filter((_, position) => harnesses[position]?.hash === prepared?.hash)
        .flatMap((item) => {
          const task = suite.simulatorTask?.(item);
          return task ? [task] : [];
        });
      client = cached(
        createModelClient(
          part.model.model,
          clientDependencies(`eval.models.${part.model.label}.model`, tasks, prepared ? [prepared.harness] : []),
        ),
        part.model.model,
        part.model.checkpoint,
      );
      clients.set(key, client);
    }
    return client;
  };
  const judgeConfig = config.judge && config.judge.suites.includes(part.suite) ? config.judge : undefined;
  const judgeClient = judgeConfig
    ? cached(createModelClient(judgeConfig.model, clientDependencies('eval.judge.model', [], [])), judgeConfig.model)
    : undefined;
  const rubric = judgeConfig?.rubric ?? defaultJudgeRubric;
  const results: EvalResult[] = new Array(items.length);
  const inProcess = part.model.model.adapter !== 'openai';
  let done = 0;
  const deadlines = new ItemDeadlines(
    deps.signal,
    config.itemTimeoutMs,
    () => new HatError('EVAL_ITEM_TIMEOUT', `item over itemTimeoutMs (${config.itemTimeoutMs} ms)`),
  );
  deps.progress({ done: 0, total: items.length, message: `${part.model.label}: ${part.suite}` });
  try {
    await forEachConcurrently(items, config.itemConcurrency, async (item, index) => {
      const { signal, done: itemDone } = deadlines.start();
      try {
        const result = await evaluateItem(suite, item, clientFor(index), harnesses[index], part, signal);
        if (judgeClient && result.status !== 'model_error' && result.status !== 'timeout') {
          const verdict: JudgeVerdict = await judgeResponse({
            client: judgeClient,
            rubric,
            prompt: result.prompt,
            response: result.response,
            ...(suite.judgeRubric?.(item) ? { itemRubric: suite.judgeRubric(item) } : {}),
            sampling: judgeConfig!.sampling,
            signal,
          });
          result.judge = { ...verdict, rubricHash: rubricHash(rubric) };
        } else if (judgeClient) {
          result.judge = {
            score: null,
            missing: true,
            error: 'the model gave no answer to judge',
            rubricHash: rubricHash(rubric),
          };
        }
        results[index] = result;
      } finally {
        itemDone();
      }
      // A job handed back (shutdown, cancel) is not an item timeout: stop, the part reruns.
      if (deps.signal.aborted)
        throw deps.signal.reason instanceof Error
          ? deps.signal.reason
          : new TransientError('EVAL_ABORTED', 'the eval part was stopped (job cancelled or worker shutting down)');
      done += 1;
      deps.progress({ done, total: items.length, message: `${part.model.label}: ${part.suite}` });
      // In-process models answer without I/O: yield so the job lock can be renewed between items.
      if (inProcess) await new Promise((resolve) => setImmediate(resolve));
    });
  } finally {
    deadlines.close();
    for (const client of clients.values()) await client.close?.();
    await judgeClient?.close?.();
  }
  const modelErrors = results.filter((result) => result.status === 'model_error' || result.status === 'timeout');
  if (modelErrors.length > 0 && modelErrors.length / results.length > config.maxModelErrorShare) {
    throw new TransientError(
      'EVAL_MODEL_UNAVAILABLE',
      `${modelErrors.length} of ${results.length} items of model ${part.model.label} on ${part.suite} failed with endpoint errors (more than maxModelErrorShare ${config.maxModelErrorShare}); first: ${modelErrors[0].error ?? modelErrors[0].status}. Check the endpoint; the part is retried`,
    );
  }
  const name = deps.part?.id ?? `part-${String(part.index).padStart(5, '0')}`;
  // Not re-validated here: results are built by this typed code, and the finish reads every one
  // back through evalResultSchema (a bad record fails the stage there, naming its line). Zod on
  // the write side was two thirds of the per-item cost of writing them (bench/eval-client.bench.ts).
  const written = await writeJsonl(deps.store, deps.output.key(`results/${name}.jsonl.gz`), results);
  const first = clients.values().next().value;
  // A generated random-weight ONNX model is a dummy whatever its client reports.
  const simulated = part.model.dummyWeights || (first?.simulated ?? false) || 'dummy' in part.model.model;
  return {
    index: part.index,
    label: part.model.label,
    suite: part.suite,
    results: {
      key: written.key,
      uri: written.uri,
      sha256: written.sha256,
      bytes: written.bytes,
      records: written.records,
    },
    items: results.length,
    modelErrors: modelErrors.length,
    judgeMissing: results.filter((result) => result.judge?.missing).length,
    ...(cacheUsed ? { cache: cacheCounts } : {}),
    model: { provider: first?.provider ?? part.model.model.adapter, modelId: first?.modelId ?? '', simulated },
  };
}

/** One item through its suite: the common result fields, its sampling seed, then the suite answers and scores it. */
function evaluateItem(
  suite: AnyEvalSuite,
  item: SuiteItem,
  client: ModelClient,
  prepared: PreparedHarness | undefined,
  part: EvalPartInput,
  signal: AbortSignal,
): Promise<EvalResult> {
  return suite.evaluate(item, {
    client,
    harness: prepared,
    part,
    signal,
    samplingSeed: samplingSeedOf(part.seed, part.model.label, item.id),
    base: {
      schemaVersion: EVAL_RESULT_SCHEMA_VERSION,
      suite: item.suite,
      itemId: item.id,
      model: part.model.label,
      prompt: suite.promptText(item),
    },
    config: (part.config.suites as Record<string, unknown>)[suite.name],
  });
}
