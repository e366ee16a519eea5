import { z } from 'zod';
import { tokenizerSourceSchema } from '../../shared/text/tokenizer-source-config';
import type { FanOutContract } from '../../queues/stage-kit/define-stage';
import { defaultPercentiles } from '../../shared/metrics/metric-summary';
import { modelConfigProblems } from '../../shared/models/model-registry';
import { samplingSettingsSchema } from '../../shared/models/openai/openai-model-config';
import { loadProfileSchema } from './load-profile';
import { replayModes } from './replay-report';
import { sloSchema } from './slo';
import { summarizeReplay } from './replay-summary';
import { sweepSchema } from './replay-sweep';
import { servingFlagsSchema } from './target-info';
import { toolLatencySchema } from './tool-latency-model';

const artifactUri = z.string().regex(/^(s3|file):\/\/.+/, 'must be an artifact URI (s3://bucket/key or file:///path)');

/**
 * The model under test: any registered model config, plus what the server cannot tell about
 * itself, recorded in every report (`hat replay compare` warns when two reports differ in them).
 */
export const replayTargetSchema = z
  .looseObject({
    adapter: z.string().min(1),
    /** What serves the model, e.g. "1× NVIDIA H20 96 GB". */
    hardware: z.string().min(1).max(200).optional(),
    /** Engine flags, e.g. { engine: vllm, speculative: mtp, numSpeculativeTokens: 1, tensorParallel: 1 }. */
    serving: servingFlagsSchema.optional(),
  })
  .superRefine((value, context) => {
    for (const problem of modelConfigProblems(modelConfigOf(value), '')) {
      const path = problem.path === '(root)' ? [] : (problem.path ?? '').split('.').filter(Boolean);
      context.addIssue({ code: 'custom', message: problem.message, path });
    }
  });

/** The model config without the replay's own fields (hardware, serving), for the model registry. */
export function modelConfigOf(target: Record<string, unknown>): Record<string, unknown> & { adapter: string } {
  const { hardware: _hardware, serving: _serving, ...model } = target;
  return model as Record<string, unknown> & { adapter: string };
}

/**
 * Config of the `replay` stage: full-agent session replay against a served model with vLLM-exact
 * metrics, session percentiles and an SLO report.
 *
 * ```yaml
 * stages:
 *   replay:
 *     inputs: ["${stages.collect.manifestUri}"]
 *     target: { adapter: openai, baseUrl: http://vllm:8000/v1, model: qwen3-35b, concurrency: 64 }
 *     load: { kind: closed, concurrency: 64 }
 *     warmupSessions: 8
 * ```
 */
export const replayInputSchema = z
  .object({
    /** Recorded sessions: JSONL(.gz) objects of trajectories or production traces, or stage manifests listing them (objects of kind `trajectories`). */
    inputs: z.array(artifactUri).min(1),
    /** The model under test: any registered model adapter (openai for vLLM/SGLang servers, onnx in-process), with `hardware` and `serving`. */
    target: replayTargetSchema,
    /** Headline of the target in reports. Default: provider, model and endpoint. */
    targetLabel: z.string().min(1).max(200).optional(),
    /**
     * forced-history: every call sends the recorded context up to that assistant turn (the exact
     * recorded workload). live: the model's own outputs are fed back and its tool calls run in
     * the simulator (needs `live`). Default forced-history.
     */
    mode: z.enum(replayModes).default('forced-history'),
    /** Live mode: the harness whose tools run the calls, and the tasks whose rooms the tools read. */
    live: z
      .object({
        /** Harness directory (a local path or file:// URI). */
        harness: z.string().min(1),
        /** Tasks (the simulator's task records) matched to sessions by taskId: JSONL(.gz) objects, or a manifest listing objects of kind `tasks` (collect's). */
        tasks: z.array(artifactUri).min(1),
        /** Model calls allowed per viewer turn. Default 6. */
        maxStepsPerTurn: z.number().int().min(1).max(64).default(6),
      })
      .strict()
      .optional(),
    /** Session load; split evenly over the parts. Default one session at a time (closed loop). */
    load: loadProfileSchema.default({ kind: 'closed', concurrency: 1 }),
    /** Sessions to replay in all, cycling through the recorded ones. Default: each recorded session once. */
    sessions: z.number().int().min(1).max(10_000_000).optional(),
    /**
     * Sessions each part replays and discards before measuring (connections, caches, JIT), at the
     * part's concurrency: at least the concurrency opens a connection per session. Default 0.
     */
    warmupSessions: z.number().int().min(0).max(100_000).default(0),
    /** Part jobs, each replaying every n-th session with 1/n of the load; run them side by side. Default 1. */
    parts: z.number().int().min(1).max(1000).default(1),
    /** Percentiles reported, in (0, 100]. Default 50, 90, 95, 99. */
    percentiles: z
      .array(z.number().gt(0).max(100))
      .min(1)
      .max(20)
      .default([...defaultPercentiles]),
    /**
     * Tool latency model: think time after tool calls for sessions recorded in the simulator
     * (whose tools answered in microseconds); production traces keep their recorded durations.
     * Default: every tool lognormal with p50 200 ms, p95 800 ms (an assumption; see workers/replay/README.md).
     */
    toolLatency: toolLatencySchema.prefault({}),
    /**
     * Capacity sweep: run the replay at each load of `ladder` (concurrencies, or rates for an open
     * loop) in turn, each step an ordinary report under `step-NN/`, until a step breaks the SLO;
     * `sweep.json`/`sweep.html` give the highest load holding it, its goodput, latency vs load and the knee.
     */
    sweep: sweepSchema.optional(),
    /** Objectives and goodput thresholds. Default: viewer turn P50 <= 3.407 s, P95 <= 8.114 s (turn_response_from_intended_ms). */
    slo: sloSchema.prefault({}),
    /** Prometheus endpoint read before and after (spec-decode counters); false to skip. Default: where the target's adapter says its server has them (`<server root>/metrics` for openai and other HTTP adapters; none in-process). */
    metricsUrl: z.union([z.url({ protocol: /^https?$/ }), z.literal(false)]).optional(),
    /** Forced history: cap each call's output at the recorded completion tokens (`recorded`) or leave the model default. Default recorded. */
    maxTokens: z.enum(['recorded', 'model-default']).default('recorded'),
    /** Send vLLM's `ignore_eos: true` so outputs run to max_tokens (vLLM and SGLang only). Default false. */
    ignoreEos: z.boolean().default(false),
    /** Sampling for every call (over the target's own defaults). */
    sampling: samplingSettingsSchema.optional(),
    /** Tokenizer that counts output tokens when the server reports no usage. Default: estimate from chunks (flagged). */
    outputTokenizer: tokenizerSourceSchema.optional(),
  })
  .strict()
  .superRefine((input, context) => {
    if (input.mode === 'live' && !input.live)
      context.addIssue({ code: 'custom', path: ['live'], message: 'mode live needs live: { harness, tasks }' });
    if (input.sweep && input.load.kind === 'closed' && input.parts > Math.round(input.sweep.ladder[0])) {
      context.addIssue({
        code: 'custom',
        path: ['parts'],
        message: `parts (${input.parts}) exceeds the first sweep step's concurrency (${input.sweep.ladder[0]}); each part needs a session in flight`,
      });
    } else if (!input.sweep && input.load.kind === 'closed' && input.parts > input.load.concurrency) {
      context.addIssue({
        code: 'custom',
        path: ['parts'],
        message: `parts (${input.parts}) exceeds load.concurrency (${input.load.concurrency}); each part needs a session in flight`,
      });
    }
  });
export type ReplayInput = z.infer<typeof replayInputSchema>;

/** A part job's data: its position and the stage config (URIs and small parameters only). */
export const replayPartInputSchema = z.object({
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  config: replayInputSchema,
});
export type ReplayPartInput = z.infer<typeof replayPartInputSchema>;

export const replayPartOutputSchema = z.object({
  key: z.string(),
  uri: z.string(),
  sha256: z.string(),
  bytes: z.number().int().nonnegative(),
  sessions: z.number().int().nonnegative(),
  calls: z.number().int().nonnegative(),
  callsFailed: z.number().int().nonnegative(),
  /** Part 0 only: the input objects read, for the manifest's lineage. */
  inputs: z.array(z.object({ uri: z.string(), sha256: z.string() })).default([]),
});
export type ReplayPartOutput = z.infer<typeof replayPartOutputSchema>;

export const replayOutputSchema = z.object({
  manifestUri: z.string(),
  reportUri: z.string(),
  htmlUri: z.string(),
  requestsCsvUri: z.string(),
  verdict: z.enum(['pass', 'fail', 'no-data']),
  /** Each SLO objective with the value observed (null: no samples) and whether it held. */
  objectives: z.array(
    z.object({
      metric: z.string(),
      percentile: z.number(),
      maxMs: z.number(),
      observed: z.number().nullable(),
      pass: z.boolean().nullable(),
    }),
  ),
  sessions: z.number().int().nonnegative(),
  calls: z.number().int().nonnegative(),
  callsFailed: z.number().int().nonnegative(),
  unreplayable: z.number().int().nonnegative(),
  /** The target's label (with its warning when it is not a real model). */
  target: z.string(),
  /** What a viewer waited per turn (from the viewer's message), and what the turns were made of. */
  viewerTurns: z
    .object({
      turns: z.number().int().nonnegative(),
      firstTokenP50Ms: z.number().nullable(),
      firstTokenP95Ms: z.number().nullable(),
      responseP50Ms: z.number().nullable(),
      responseP95Ms: z.number().nullable(),
      callsPerTurnMean: z.number().nullable(),
      toolMsPerTurnMean: z.number().nullable(),
      modelMsPerTurnMean: z.number().nullable(),
    })
    .optional(),
  /** The serving setup in one line (hardware, engine and version, served model, flags). */
  serving: z.string().optional(),
  /** A sweep's outcome (reportUri and htmlUri are then sweep.json and sweep.html). */
  sweep: z
    .object({
      steps: z.number().int().nonnegative(),
      capacity: z.number().nullable(),
      knee: z.number().nullable(),
      stoppedBecause: z.string(),
    })
    .optional(),
});
export type ReplayOutput = z.infer<typeof replayOutputSchema>;

export const replayContract: FanOutContract<ReplayInput, ReplayOutput, ReplayPartInput, ReplayPartOutput> = {
  name: 'replay',
  description:
    'full-agent session replay against a served model: vLLM-exact call metrics, session percentiles, SLO report',
  input: replayInputSchema,
  output: replayOutputSchema,
  summarize: summarizeReplay,
  partCounters: (part) => ({ sessions: part.sessions, calls: part.calls, callsFailed: part.callsFailed }),
  partInput: replayPartInputSchema,
  partOutput: replayPartOutputSchema,
  // Model-bound: parts wait on the server, so a worker runs many side by side (they must, to offer the whole load).
  queue: { attempts: 3, backoffMs: 2000, concurrency: 64, lockDurationMs: 120_000 },
};
