import { BadInputError } from '../../errors';

/**
 * Which distribution a sampled token's logprob is of. Engines differ (REFERENCES.md, "Served
 * models, token-exact"):
 * - `raw`: log-softmax of the raw logits (temperature 1, no top-k/top-p). vLLM's default
 *   (`--logprobs-mode raw_logprobs`), SGLang greedy requests, SGLang with original logprobs.
 * - `tempered`: log-softmax of logits / T over the whole vocabulary, before top-k/top-p. SGLang
 *   sampled requests, the in-process ONNX decoder.
 * - `processed`: the distribution tokens were actually drawn from: temperature, then top-k/top-p
 *   with renormalization (vLLM `--logprobs-mode processed_logprobs`).
 */
export type LogprobKind = 'raw' | 'tempered' | 'processed';

/** Recorded with every logprob list: what it is a logprob of. */
export interface LogprobDistribution {
  kind: LogprobKind;
  /** Temperature the logprobs are computed at (1 for raw). */
  temperature: number;
  /** Truncation applied before the logprobs were taken (only `processed` has any). */
  topP: number;
  topK: number;
  /** Engine that reported them: `vllm`, `sglang`, `onnx`, or a hosted API's provider. */
  engine: string;
}

/** What an engine reports, as configured. */
export type EngineLogprobsMode = 'raw_logprobs' | 'processed_logprobs' | 'tempered_logprobs';

/** A sampler as the logprob checks see it: what it reports, and how it could report otherwise. */
export interface LogprobSource {
  /** Named in refusals and recorded with the distribution (`vllm`, `sglang`, `onnx`). */
  readonly engine: string;
  readonly logprobsMode: EngineLogprobsMode;
  /** What it reports when its config does not say (a refusal says when that is the cause). */
  readonly defaultLogprobsMode?: EngineLogprobsMode;
  /** How to make it report the processed distribution, when it can (vLLM: serve with `--logprobs-mode processed_logprobs`). */
  readonly processedLogprobsHint?: string;
}

export interface SamplingOfTurn {
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
}

function truncates(sampling: SamplingOfTurn): boolean {
  return sampling.temperature > 0 && (sampling.topP < 1 || sampling.topK > 0);
}

/**
 * The distribution an engine's sampled-token logprobs are of, for these sampling settings.
 * Greedy requests are reported at temperature 1 by every engine here (vLLM and SGLang skip the
 * temperature for greedy rows; the in-process decoder's logprob temperature of greedy is 1).
 */
export function reportedDistribution(
  engine: string,
  mode: EngineLogprobsMode,
  sampling: SamplingOfTurn,
): LogprobDistribution {
  if (sampling.temperature === 0 || mode === 'raw_logprobs')
    return { kind: 'raw', temperature: 1, topP: 1, topK: 0, engine };
  if (mode === 'tempered_logprobs')
    return { kind: 'tempered', temperature: sampling.temperature, topP: 1, topK: 0, engine };
  return truncates(sampling)
    ? { kind: 'processed', temperature: sampling.temperature, topP: sampling.topP, topK: sampling.topK, engine }
    : // Without truncation the processed distribution is the tempered one.
      { kind: 'tempered', temperature: sampling.temperature, topP: 1, topK: 0, engine };
}

/** The distribution tokens were drawn from (what importance ratios need the behaviour policy's logprobs of). */
export function samplingDistribution(engine: string, sampling: SamplingOfTurn): LogprobDistribution {
  if (sampling.temperature === 0) return { kind: 'raw', temperature: 1, topP: 1, topK: 0, engine };
  if (truncates(sampling))
    return { kind: 'processed', temperature: sampling.temperature, topP: sampling.topP, topK: sampling.topK, engine };
  return {
    kind: sampling.temperature === 1 ? 'raw' : 'tempered',
    temperature: sampling.temperature,
    topP: 1,
    topK: 0,
    engine,
  };
}

/** Whether two descriptions name the same numbers (raw equals tempered at 1; the engine does not matter). */
export function sameDistribution(a: LogprobDistribution, b: LogprobDistribution): boolean {
  const normal = (value: LogprobDistribution) =>
    value.kind === 'processed'
      ? value
      : { kind: 'full', temperature: value.kind === 'raw' ? 1 : value.temperature, topP: 1, topK: 0 };
  const left = normal(a);
  const right = normal(b);
  return (
    left.kind === right.kind &&
    left.temperature === right.temperature &&
    left.topP === right.topP &&
    left.topK === right.topK
  );
}

export function describeDistribution(value: LogprobDistribution): string {
  if (value.kind === 'raw') return `raw logprobs (temperature 1, no top-k/top-p) from ${value.engine}`;
  if (value.kind === 'tempered')
    return `logprobs at temperature ${value.temperature} before top-k/top-p from ${value.engine}`;
  return `logprobs of the sampling distribution (temperature ${value.temperature}, top-p ${value.topP}, top-k ${value.topK}) from ${value.engine}`;
}

/**
 * RL: the trainer's importance ratios divide by the rollout logprobs, which must be of the
 * distribution tokens were drawn from. Refuses (`LOGPROB_DISTRIBUTION_MISMATCH`) a served engine
 * whose logprobs would silently be of another one, e.g. vLLM's default raw logprobs with
 * temperature 0.7, or SGLang's tempered ones with top-p 0.9.
 */
export function checkRolloutLogprobs(
  where: string,
  source: LogprobSource,
  sampling: SamplingOfTurn,
): LogprobDistribution {
  const { engine } = source;
  const reported = reportedDistribution(engine, source.logprobsMode, sampling);
  const wanted = samplingDistribution(engine, sampling);
  if (sameDistribution(reported, wanted)) return reported;
  const fixes =
    source.processedLogprobsHint !== undefined
      ? `${source.processedLogprobsHint}, or sample at temperature 1 without top-p/top-k`
      : 'sample without top-p/top-k (set topP: 1, topK: 0), or use an engine that reports the processed distribution (vLLM --logprobs-mode processed_logprobs)';
  throw new BadInputError(
    'LOGPROB_DISTRIBUTION_MISMATCH',
    `${where}: the ${engine} engine would report ${describeDistribution(reported)}, but tokens are drawn from ${describeDistribution(wanted)}; importance ratios against these rollout logprobs would be silently wrong. Fix: ${fixes}`,
  );
}

/**
 * Distill: the reverse KL subtracts teacher logprobs over the whole vocabulary at
 * `logprobTemperature` from the student's rollout logprobs, which must be of the same
 * distribution: tempered (or raw) at that temperature, never truncated.
 */
export function checkDistillLogprobs(
  where: string,
  source: LogprobSource,
  sampling: SamplingOfTurn,
  logprobTemperature: number,
): LogprobDistribution {
  const { engine, logprobsMode: mode } = source;
  const reported = reportedDistribution(engine, mode, sampling);
  const wanted: LogprobDistribution = {
    kind: logprobTemperature === 1 ? 'raw' : 'tempered',
    temperature: logprobTemperature,
    topP: 1,
    topK: 0,
    engine,
  };
  if (sameDistribution(reported, wanted)) return reported;
  throw new BadInputError(
    'LOGPROB_DISTRIBUTION_MISMATCH',
    `${where}: the ${engine} student would report ${describeDistribution(reported)}, but the reverse KL needs logprobs at temperature ${logprobTemperature} over the whole vocabulary (as the teacher's); ` +
      (mode === 'raw_logprobs' && source.defaultLogprobsMode === 'raw_logprobs'
        ? `set logprobTemperature: 1 (${engine} reports raw logprobs by default)`
        : `set logprobTemperature to ${reported.kind === 'processed' ? 'the sampling temperature and sample without top-p/top-k' : reported.temperature}`),
  );
}
